"""`/status` while halo.db's write lock is held by a transaction that needs the event loop to end
(every write: its statements run in aiosqlite's thread, its COMMIT is sent from the loop). The
status reads the memory jobs in a thread, so the loop stays free, the transaction ends, and the
status answers. Before, its first read of them took the write lock on the loop itself: each
waited for the other until SQLite gave up after 30 s ("database is locked", a 500; seen in
test_escalation under load)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import insert

from config.settings import Settings
from halo.work.tasks import metadata, tasks_table
from memory.state import JobStateStore
from tests.conftest import OWNER_AUTH, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.waiting import eventually


class RolledBack(Exception):
    """Ends the held transaction without keeping its row."""


@pytest.mark.own_store  # SQLite's file lock: PostgreSQL locks rows
async def test_status_answers_once_a_write_transaction_beside_it_ends(
    fake_llm: FakeOpenAI, settings_for: Callable[..., Settings], serve_halo: Any
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    db = running.halo.db
    jobs = running.halo.memory.state  # memory_jobs, on its own engine: not made until first used
    assert isinstance(jobs, JobStateStore) and not jobs._ready
    await running.halo.pairing.list_pending()  # halo.db's tables the status reads, made (they wait in a thread)

    async def status() -> tuple[int, dict[str, Any]]:
        async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
            return resp.status, await resp.json()

    with pytest.raises(RolledBack):
        async with db.write(metadata) as conn:  # any write: it needs the loop to reach its COMMIT
            now = time.time()
            row = {"project": "x", "title": "x", "status": "open", "scope_id": "web:wags"}
            await conn.execute(insert(tasks_table).values(**row, created_at=now, updated_at=now))
            asked = asyncio.create_task(status())
            # the status is at the lock (in a thread), or has answered
            in_use = jobs.engine.pool.checkedout  # type: ignore[attr-defined]
            await eventually(lambda: asked.done() or in_use() >= 1, what="/status reading the memory jobs")
            raise RolledBack
    code, body = await asked
    assert code == 200 and "distillation" in body, body
