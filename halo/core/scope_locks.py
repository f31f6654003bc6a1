"""One lock per scope: a scope handles one thing at a time.

A live turn holds its scope's lock from the moment the message arrives until its reply is
queued. Answering a message a crash left open (halo/pipeline/missed.py) and admin work on a
whole scope (clear, purge: admin_api/routes/sessions.py) take the same lock, so none of them
interleave with a turn. Different scopes never wait for each other.
"""

from __future__ import annotations

import asyncio


class ScopeLocks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def of(self, scope_id: str) -> asyncio.Lock:
        return self._locks.setdefault(scope_id, asyncio.Lock())

    @property
    def busy(self) -> int:
        """Scopes holding their lock right now (others may be waiting behind each)."""
        return sum(1 for lock in self._locks.values() if lock.locked())
