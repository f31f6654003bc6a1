"""The family lease and its fencing, on the real PostgreSQL (halo/cluster, halo/storage/db.py).

Two `Cluster`s on one database stand for two processes of one family. One holds the family;
the other stands by. When the holder's lease lapses or its session ends, the standby takes
the family at a higher epoch, and from then on every write of the old holder is refused
(`Fenced`) and it stops serving — whatever it still believed. A write already past its epoch
check when the take comes is committed before the new epoch exists (the take waits for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from halo.cluster.cluster import Cluster
from halo.cluster.family_lease import Node
from halo.storage import Fenced, HaloDB
from halo.storage.transcript_rows import TranscriptRows
from halo.storage.transcript_rows import metadata as transcript_tables
from tests.storage_support import fresh_database
from tests.waiting import eventually
from transcripts.records import RecordedLine

pytestmark = pytest.mark.postgres


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as url:
        yield url


class Process:
    """One process's HaloDB and cluster part, and what its activate/deactivate were told."""

    def __init__(self, tmp: Path, url: str, name: str, lease: float, idle: float | None = None) -> None:
        self.db = HaloDB(tmp / f"{name}.db", url, family_id="fam", idle_seconds=idle or lease)
        self.cluster = Cluster(self.db, Node(name, "test", f"http://{name}"), lease)
        self.serving = False
        self.switches: list[str] = []

    async def start(self) -> None:
        await self.db.prepare()
        await self.cluster.start(self._activate, self._deactivate)

    async def _activate(self) -> None:
        self.serving = True
        self.switches.append("active")

    async def _deactivate(self) -> None:
        self.serving = False
        self.switches.append("standby")

    async def write(self, seq: int, text: str = "hello") -> None:
        line = RecordedLine(seq, datetime.now(UTC), f'{{"text": "{text}"}}')
        await TranscriptRows(self.db).append("web:mom", [line])

    async def close(self) -> None:
        await self.cluster.stop()
        await self.db.close()


async def _admin(url: str) -> asyncpg.Connection:
    return await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))


async def test_one_process_holds_the_family_and_the_other_stands_by(tmp_path: Path, database: str) -> None:
    a, b = Process(tmp_path, database, "a", 30), Process(tmp_path, database, "b", 30)
    try:
        await a.start()
        await eventually(lambda: a.serving, what="a active")
        await b.start()
        assert a.cluster.role == "active" and b.cluster.role == "standby"
        assert b.cluster.active_address() == "http://a"  # where b forwards
        await a.write(0)
        with pytest.raises(Fenced):  # a standby writes nothing
            await b.write(1)
        roles = {n.id: (n.role, n.epoch) for n in await b.cluster.nodes()}
        assert roles == {"a": ("active", 1), "b": ("standby", None)}
    finally:
        await b.close()
        await a.close()


async def test_the_holder_session_ending_hands_the_family_over_and_fences_the_old_holder(
    tmp_path: Path, database: str
) -> None:
    """A long lease (600 s) that never lapses: the holder's database session ending (what a
    kill -9 does) is enough. The old holder, which still believes it is active, is refused."""
    a, b = Process(tmp_path, database, "a", 600), Process(tmp_path, database, "b", 600)
    admin = await _admin(database)
    try:
        await a.start()
        await eventually(lambda: a.serving, what="a active")
        await b.start()
        await a.write(0, "before")
        pid = await admin.fetchval("SELECT holder_pid FROM family_leases WHERE family_id = 'fam'")
        a.cluster._stopped.set()  # a beats no more (as if frozen), so it cannot notice on its own
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
        await eventually(lambda: b.serving, what="b takes the family once a's session is gone")
        assert b.cluster.epoch == 2
        with pytest.raises(Fenced):
            await a.write(1, "stale")
        await eventually(lambda: not a.serving, what="a stops serving once a write is refused")
        await b.write(1, "after")
        lines = await admin.fetch("SELECT seq, line FROM transcript_lines ORDER BY seq")
        assert [r["line"] for r in lines] == ['{"text": "before"}', '{"text": "after"}']
    finally:
        await admin.close()
        await b.close()
        await a.close()


async def test_a_take_waits_for_a_write_in_flight_and_the_next_write_is_refused(tmp_path: Path, database: str) -> None:
    # a's open write is not ended by PostgreSQL here (idle 60 s): the take waits for it as long as it lasts
    a, b = Process(tmp_path, database, "a", 1.5, idle=60), Process(tmp_path, database, "b", 1.5)
    admin = await _admin(database)
    try:
        await a.start()
        await eventually(lambda: a.serving, what="a active")
        await b.start()
        a.cluster._stopped.set()  # a stops renewing: its lease lapses, b takes over
        in_flight = asyncio.Event()
        release = asyncio.Event()

        async def slow_write() -> None:
            async with a.db.write(transcript_tables) as conn:
                for seq in (0, 1):  # the first statement is past the epoch check; the second comes after the take began
                    await conn.exec_driver_sql(
                        "INSERT INTO transcript_lines (family_id, scope_id, seq, ts, line) "
                        f"VALUES ('fam', 'web:mom', {seq}, now(), 'in flight {seq}')"
                    )
                    if seq == 0:
                        in_flight.set()
                        await release.wait()

        writing = asyncio.create_task(slow_write())
        await in_flight.wait()
        # the lease lapses; b's take waits for the write in flight (it holds the epoch row)
        await eventually(
            lambda: admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ),
            within=30,
            what="b's take waiting for a's write",
        )
        assert not b.serving
        release.set()
        await writing
        await eventually(lambda: b.serving, what="b takes the family after the write in flight committed")
        with pytest.raises(Fenced):
            await a.write(2, "stale")
        lines = await admin.fetch("SELECT line FROM transcript_lines ORDER BY seq")
        assert [r["line"] for r in lines] == ["in flight 0", "in flight 1"]
    finally:
        await admin.close()
        await b.close()
        await a.close()


async def test_a_clean_stop_hands_the_family_over_at_once(tmp_path: Path, database: str) -> None:
    a, b = Process(tmp_path, database, "a", 600), Process(tmp_path, database, "b", 600)
    try:
        await a.start()
        await eventually(lambda: a.serving, what="a active")
        await b.start()
        await a.cluster.stop()  # the lease lapses now, not in 600 s
        await eventually(lambda: b.serving, what="b active after a's clean stop")
        assert a.switches == ["active"] and b.cluster.epoch == 2
    finally:
        await b.close()
        await a.db.close()
