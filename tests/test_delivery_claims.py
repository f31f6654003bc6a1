"""Two processes' outboxes on one PostgreSQL database: two `Delivery` instances, each with its own
engine (its own connections, as two processes have), send every row once and each scope's rows
in the order they were queued, whichever of them sends which (on a busy machine one may
send most of them: what matters is that none goes twice and none out of order).

The platform is a stand-in that records what it was handed, with a pause in each send so the
two deliveries overlap."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.family import Family
from halo.outbound.delivery import Delivery
from halo.port import Outbound
from halo.storage import HaloDB
from tests.storage_support import fresh_database
from tests.waiting import eventually
from transcripts import TranscriptStore

SCOPES = [f"telegram:{chat}" for chat in range(1, 7)]
EACH = 8


class Platform:
    """Records each message handed over, by which sender; a short pause keeps the send in flight."""

    platform = "telegram"

    def __init__(self, name: str, received: list[tuple[str, Outbound]]) -> None:
        self.name = name
        self.received = received

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> dict[str, object]:
        return {}

    async def send(self, message: Outbound) -> None:
        self.received.append((self.name, message))
        await asyncio.sleep(0.005)  # a network round trip's worth: the other delivery tries meanwhile


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as database:
        yield database


def nobody() -> Family:
    return Family.model_validate({"family": {"name": "Test"}, "members": []})


async def test_two_deliveries_on_one_database_send_each_row_once_and_in_order(url: str, tmp_path: Path) -> None:
    received: list[tuple[str, Outbound]] = []
    dbs = [HaloDB(tmp_path / "unused.db", url), HaloDB(tmp_path / "unused.db", url)]
    deliveries = [Delivery(db, TranscriptStore(tmp_path / f"t{n}"), nobody) for n, db in enumerate(dbs)]
    # every row queued first (as a third process would), so both find all of them at once
    queued = [
        (await deliveries[0].store.add(scope, f"{scope} #{n}", kind="notice", reply_to=None, now=datetime.now(UTC)))
        for n in range(EACH)
        for scope in SCOPES
    ]
    for name, delivery in zip("ab", deliveries, strict=True):
        delivery.register("telegram", Platform(name, received))
    await asyncio.gather(*(delivery.start() for delivery in deliveries))

    await eventually(lambda: len(received) >= len(queued), what="every queued row sent")
    for delivery in deliveries:
        await delivery.drain()
    sent_ids = [message.id for _, message in received]
    assert sorted(sent_ids) == sorted(row.message.id for row in queued)  # each once: no row twice
    for scope in SCOPES:
        texts = [message.text for _, message in received if message.scope_id == scope]
        assert texts == [f"{scope} #{n}" for n in range(EACH)]  # in the order queued
    rows = await deliveries[1].store.rows(limit=1000)
    assert {row.state for row in rows} == {"sent"} and all(row.attempts == 1 for row in rows)
    for delivery, db in zip(deliveries, dbs, strict=True):
        await delivery.close()
        await db.close()
