"""Agent tools. Each one asks the policy (`use_tool`) itself before doing anything."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Concatenate, ParamSpec

from agents import FunctionTool, RunContextWrapper, Tool, function_tool

from halo.core.turn import TurnRun

P = ParamSpec("P")
ToolFn = Callable[Concatenate[RunContextWrapper[TurnRun], P], Awaitable[str]]
CLASS_ATTRIBUTE = "halo_tool_class"


def tool_class(tool: Tool) -> str:
    """The class a guarded tool declared (kept on the tool object); "internal" for anything
    else (it still asks the policy)."""
    return str(getattr(tool, CLASS_ATTRIBUTE, "internal"))


def guarded_tool(tool_class: str = "internal") -> Callable[[ToolFn[P]], FunctionTool]:
    """Turn an async function into a tool that is refused, in code, when the policy says no.

    `tool_class` lets policies reason about kinds of tools: "internal", "private"
    (reveals a member's data), "outward" (reaches outside the home).
    """

    def wrap(fn: ToolFn[P]) -> FunctionTool:
        @functools.wraps(fn)
        async def checked(ctx: RunContextWrapper[TurnRun], *args: Any, **kwargs: Any) -> str:
            run = ctx.context
            decision = run.turn.allow_tool(fn.__name__, tool_class)
            if not decision.allowed:
                return f"Not allowed: {decision.reason}"
            if (refusal := _over_budget(run, fn.__name__, getattr(ctx, "tool_arguments", repr(kwargs)))) is not None:
                return refusal
            return await fn(ctx, *args, **kwargs)

        tool = function_tool(checked)
        setattr(tool, CLASS_ATTRIBUTE, tool_class)
        return tool

    return wrap


def _over_budget(run: TurnRun, name: str, arguments: str) -> str | None:
    """Bounded tool loops, in code: the same call twice, or more calls than the budget, are
    not run; the model is told to answer with what it has, and the reply says why."""
    call, budget = (name, arguments), run.turn.tool_budget
    if call in run.tool_calls:
        run.cut_short = f"{name} was asked for the same thing twice"
        return "You already called this tool with exactly these arguments. Answer now with what you have."
    if len(run.tool_calls) >= budget:
        run.cut_short = f"the limit of {budget} tool calls for one message was reached"
        return "The tool limit for this message is reached. Answer now with what you have."
    run.tool_calls.append(call)
    return None


@guarded_tool()
async def current_time(ctx: RunContextWrapper[TurnRun]) -> str:
    """The current local date and time."""
    return datetime.now().astimezone().strftime("%A %Y-%m-%d %H:%M %Z")


def default_tools() -> list[FunctionTool]:
    return [current_time]
