"""Per-scope timers and the background tasks they start, stopped together on close.

Memory's quiet timer (model extraction, graph ingestion) and graph ingestion's retry after
a backoff both keep one pending call per scope: setting a scope's timer again replaces it,
a purge cancels it, and closing cancels every timer and every task still running.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any


class ScopeTimers:
    """At most one pending call per scope, plus the tasks spawned in the background."""

    def __init__(self) -> None:
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self.tasks: set[asyncio.Task[Any]] = set()

    def call_later(self, scope_id: str, delay: float, callback: Callable[[str], None]) -> None:
        """Call `callback(scope_id)` after `delay` seconds, instead of the scope's pending call."""
        self.cancel(scope_id)
        self._handles[scope_id] = asyncio.get_running_loop().call_later(delay, self._due, scope_id, callback)

    def _due(self, scope_id: str, callback: Callable[[str], None]) -> None:
        self._handles.pop(scope_id, None)
        callback(scope_id)

    def cancel(self, scope_id: str) -> None:
        if (handle := self._handles.pop(scope_id, None)) is not None:
            handle.cancel()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `work` in the background; it is kept (in `tasks`) until it ends or `close` cancels it."""
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def close(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        for task in list(self.tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self.tasks, return_exceptions=True)
