"""What a Discord slash command's autocomplete offers in a work channel: the projects of its
tasks, and its open tasks. Only that channel's own tasks: nothing that was not said there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from halo.work.tasks import TaskStore

MAX_SUGGESTIONS = 25  # Discord shows at most 25 choices

Suggestion = tuple[str, str]  # (what is shown, the value the option gets)


class TaskSuggestions:
    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def __call__(self, scope_id: str, what: Literal["project", "task"], typed: str) -> Sequence[Suggestion]:
        tasks = await self.store.list(scope_ids=[scope_id])
        typed = typed.strip().lower()
        if what == "project":
            projects = sorted({t.project for t in tasks}, key=str.lower)
            return [(p, p) for p in projects if typed in p.lower()][:MAX_SUGGESTIONS]
        open_tasks = [t for t in tasks if t.status != "done"]
        shown = [(f"#{t.number} {t.title} ({t.project})"[:100], str(t.number)) for t in open_tasks]
        return [s for s in shown if typed in s[0].lower()][:MAX_SUGGESTIONS]
