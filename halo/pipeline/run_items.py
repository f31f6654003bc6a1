"""What a model run adds to a scope's history, as model items (`TResponseInputItem`).

The gateway sends the model its history plus the message and writes what the run produced
itself (see transcripts/session.py): the same items the SDK would save through a `Session`;
from a run that failed, the tool calls that finished (`ToolSteps`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from agents import Agent, RunContextWrapper, RunHooks, RunItem, Tool, TResponseInputItem
from agents.tool_context import ToolContext

if TYPE_CHECKING:
    from halo.core.turn import TurnRun


def input_items(run_items: Sequence[RunItem]) -> list[TResponseInputItem]:
    """The run's new items as the model will be sent them next turn (an approval request is
    not an item; a `status` of None is left out, as the SDK's own sessions do)."""
    items: list[TResponseInputItem] = []
    for run_item in run_items:
        if run_item.type == "tool_approval_item":
            continue
        item: Any = run_item.to_input_item()
        if isinstance(item, dict) and "status" in item and item["status"] is None:
            item = {k: v for k, v in item.items() if k != "status"}
        items.append(cast(TResponseInputItem, item))
    return items


class ToolSteps(RunHooks["TurnRun"]):
    """Keeps each tool call that finished, with its output, on the run: when the run fails
    later on (a provider outage, a stopped reply), what was done stays in the history."""

    async def on_tool_end(
        self, context: RunContextWrapper[TurnRun], agent: Agent[TurnRun], tool: Tool, result: object
    ) -> None:
        if isinstance(context, ToolContext):
            call = {"type": "function_call", "call_id": context.tool_call_id, "name": context.tool_name}
            output = {"type": "function_call_output", "call_id": context.tool_call_id, "output": str(result)}
            context.context.tool_steps.extend([{**call, "arguments": context.tool_arguments}, output])
