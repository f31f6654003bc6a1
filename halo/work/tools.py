"""Agent tools over the task list: `list_tasks` and `update_task`, offered in work scopes only.

Their tool class is "work": the policy forbids that class outside work channels
(`work-tools-in-work-channels`), so the gateway does not even show them to the model in a
family scope, and each call asks the policy again before touching a task.
"""

from __future__ import annotations

from typing import Literal

from agents import FunctionTool, RunContextWrapper

from halo.core.turn import TurnRun
from halo.tools.guarded import guarded_tool
from halo.work.status import readable_work_scopes
from halo.work.tasks import TaskError, TaskStore

WORK_TOOL_CLASS = "work"


def task_tools(store: TaskStore) -> list[FunctionTool]:
    @guarded_tool(WORK_TOOL_CLASS)
    async def list_tasks(ctx: RunContextWrapper[TurnRun], project: str | None = None) -> str:
        """List the tasks of the work channels with their number, status, project, owner and
        last note. `project`: only that project's tasks."""
        tasks = await store.list(project=project)
        readable = {s.id for s in readable_work_scopes(ctx.context.turn, {t.scope_id for t in tasks})}
        lines = []
        for t in tasks:
            if t.scope_id not in readable:
                continue
            note = t.last_note
            last = f" — {note.text}" if note else ""
            lines.append(f"#{t.number} [{t.status}] {t.title} ({t.project}){last}")
        return "\n".join(lines) or "No tasks."

    @guarded_tool(WORK_TOOL_CLASS)
    async def update_task(
        ctx: RunContextWrapper[TurnRun],
        number: int,
        action: Literal["start", "note", "block", "done"],
        text: str = "",
    ) -> str:
        """Change task `number`: start it, add a progress note, mark it blocked (text: why)
        or done (text: an optional note)."""
        turn = ctx.context.turn
        try:
            task = await store.get(number)
        except TaskError:
            task = None
        readable = {s.id for s in readable_work_scopes(turn, {task.scope_id} if task else set())}
        if task is None or task.scope_id not in readable:
            return f"There is no task {number} here."
        by = turn.envelope.speaker.label
        try:
            if action == "start":
                task = await store.start(number, by=by)
            elif action == "note":
                task = await store.note(number, text, by=by)
            elif action == "block":
                task = await store.block(number, text, by=by)
            else:
                task = await store.done(number, text, by=by)
        except TaskError as exc:
            return str(exc)
        return f"Task #{task.number} ({task.title}) is now {task.status}."

    return [list_tasks, update_task]
