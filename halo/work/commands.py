"""`/task …` and `/tasks`: the task list managed from a work channel, answered in code.

The handlers are plain async functions of (store, turn, args); `task_commands` binds them
to a store as `Command`s, and the composition root puts them in its registry. They work in
work channels only, for whoever the policy lets ask status there (`ask_status`): colleagues
and parents.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from halo.commands.builtin import Command
from halo.core.envelope import ScopeType
from halo.core.options import Option, WithOptions
from halo.core.turn import Turn
from halo.work.status import readable_work_scopes
from halo.work.tasks import Task, TaskError, TaskStore

TASK_USAGE = (
    "Usage: /task add <project>: <title> · /task start N · /task note N <text> · "
    "/task block N <why> · /task done N [note]"
)
_NUMBER = re.compile(r"#?(\d+)\s*(.*)", re.S)


WORK: frozenset[ScopeType] = frozenset({"work_channel"})  # the menus that offer /task and /tasks


def refusal(turn: Turn) -> str | None:
    """Tasks belong to work channels; None when this turn may use them."""
    if turn.scope.type != "work_channel":
        return "Tasks live in the team's work channels; ask me there."
    decision = turn.decide("ask_status")
    return None if decision.allowed else f"Sorry, I can't manage tasks here: {decision.reason}"


def status_buttons(task: Task) -> tuple[Option, ...]:
    """Under a task's status message in the work channel: the /task commands its next step
    would be, as buttons (start · block · done)."""
    n = task.number
    options = [Option("Start", f"/task start {n}")] if task.status != "doing" else []
    if task.status != "blocked":
        options.append(Option("Block", f"/task block {n} blocked (from the button; /task note {n} says why)"))
    options.append(Option("Done", f"/task done {n}"))
    return tuple(options)


def _who(turn: Turn) -> str:
    return turn.envelope.speaker.label


def _line(task: Task) -> str:
    owner = f", {task.owner}" if task.owner else ""
    return f"#{task.number} [{task.status}] {task.title} ({task.project}{owner})"


async def task_command(store: TaskStore, turn: Turn, args: str) -> str | WithOptions:
    if refused := refusal(turn):
        return refused
    verb, _, rest = args.strip().partition(" ")
    verb = verb.lower()
    try:
        if verb == "add":
            project, colon, title = rest.partition(":")
            if not colon or not title.strip():
                return "Usage: /task add <project>: <title>"
            task = await store.add(project, title, scope_id=turn.scope.id, by=_who(turn))
            return WithOptions(f"Added task #{task.number}: {task.title} ({task.project}).", status_buttons(task))
        if verb not in ("start", "note", "block", "done"):
            return TASK_USAGE
        found = _NUMBER.fullmatch(rest.strip())
        if found is None:
            return TASK_USAGE
        number, text = int(found.group(1)), found.group(2).strip()
        if verb == "start":
            task = await store.start(number, by=_who(turn))
            return WithOptions(f"Started #{task.number}: {task.title}.", status_buttons(task))
        if verb == "note":
            if not text:
                return "Usage: /task note N <text>"
            task = await store.note(number, text, by=_who(turn))
            return f"Noted on #{task.number}."
        if verb == "block":
            if not text:
                return "Usage: /task block N <why>"
            task = await store.block(number, text, by=_who(turn))
            return WithOptions(f"#{task.number} is blocked: {text}", status_buttons(task))
        task = await store.done(number, text, by=_who(turn))
        return f"Done: #{task.number} {task.title}."
    except TaskError as exc:
        return str(exc)


async def tasks_command(store: TaskStore, turn: Turn, args: str) -> str:
    if refused := refusal(turn):
        return refused
    project = args.strip() or None
    tasks = await store.list(project=project)
    readable = {s.id for s in readable_work_scopes(turn, {t.scope_id for t in tasks})}
    open_tasks = [t for t in tasks if t.status != "done" and t.scope_id in readable]
    if not open_tasks:
        where = f" for {project}" if project else ""
        return f"No open tasks{where}. Add one with /task add <project>: <title>."
    return "\n".join(_line(t) for t in open_tasks)


def task_commands(store: TaskStore) -> list[Command]:
    """`/task` and `/tasks`, bound to `store` (the composition root adds them)."""

    def bound(
        handler: Callable[[TaskStore, Turn, str], Awaitable[str | WithOptions]],
    ) -> Callable[[Turn, str], Awaitable[str | WithOptions]]:
        async def run(turn: Turn, args: str) -> str | WithOptions:
            return await handler(store, turn, args)

        run.__name__ = handler.__name__
        return run

    return [
        Command(
            "task",
            "Add or update a task (work channels)",
            bound(task_command),
            usage="add|start|note|block|done …",
            where=WORK,
        ),
        Command("tasks", "List open tasks (work channels)", bound(tasks_command), usage="[project]", where=WORK),
    ]
