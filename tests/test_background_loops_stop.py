"""A background loop that is closed at the moment it is woken still ends.

Python 3.11's `asyncio.wait_for` returns the inner result when a cancel arrives in the same loop
pass as the wake-up, and the cancel is lost: the outbox worker went on polling, and `halo.close()`
waited for it until pytest-timeout (seen under load, on PostgreSQL, in test_reminders). The loops
wait with `asyncio.timeout`, which keeps the cancel. Each test wakes the loop and cancels it in
the same pass, the race that lost it, several times over.
"""

from __future__ import annotations

import asyncio
import linecache
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config.settings import Settings
from halo.family.direct import DirectMessages
from halo.outbound.delivery import Delivery
from halo.reminders.firing import ReminderScheduler
from halo.reminders.store import ReminderStore
from halo.storage import HaloDB
from tests.waiting import eventually
from transcripts import TranscriptStore

ROUNDS = 5


def waiting_on(task: asyncio.Task[Any] | None, source: str) -> bool:
    """The task is suspended on the line of its coroutine that holds `source`."""
    if task is None or task.done():
        return False
    frames = task.get_stack(limit=1)
    if not frames:
        return False
    frame = frames[0]
    return source in linecache.getline(frame.f_code.co_filename, frame.f_lineno)


async def ends_when_closed(loop: Callable[[], asyncio.Task[Any] | None], close: Callable[[], Any]) -> None:
    """`close()` returns, and the loop's task is over (a lost cancel leaves both waiting)."""
    task = loop()
    closing = asyncio.ensure_future(close())
    done, _ = await asyncio.wait({closing}, timeout=10)
    assert closing in done, "close() still waits for a loop that lost its cancel"
    assert task is not None and task.done()


async def test_the_outbox_worker_ends_when_closed_as_it_wakes(tmp_path: Path, settings_for) -> None:
    family = settings_for().family_view()
    db = HaloDB(tmp_path / "halo.db")
    try:
        delivery = Delivery(db, TranscriptStore(tmp_path / "transcripts"), lambda: family)
        delivery.poll_every = 60.0  # on PostgreSQL the worker also looks for rows other processes queued
        for _ in range(ROUNDS):
            await delivery.start()
            await eventually(lambda: waiting_on(delivery._worker, "self._wake.wait()"), what="the worker idle")
            delivery.know("web")
            delivery.register("web", object())  # type: ignore[arg-type]  # wakes the worker: what waited may go
            await ends_when_closed(lambda: delivery._worker, delivery.close)
    finally:
        await db.close()


async def test_the_reminder_clock_ends_when_closed_as_it_wakes(
    tmp_path: Path, settings_for: Callable[..., Settings]
) -> None:
    family = settings_for().family_view()
    db = HaloDB(tmp_path / "halo.db")
    try:
        delivery = Delivery(db, TranscriptStore(tmp_path / "transcripts"), lambda: family)
        direct = DirectMessages(lambda: family, delivery.can_send)
        clock = ReminderScheduler(
            ReminderStore(db), delivery, direct, lambda: family, quiet_until=lambda scope, at: None
        )
        for _ in range(ROUNDS):
            clock.start()
            await eventually(lambda: waiting_on(clock._task, "self._wake.wait()"), what="the clock idle")
            clock.wake()
            await ends_when_closed(lambda: clock._task, clock.close)
    finally:
        await db.close()
