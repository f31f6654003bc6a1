"""Scope leases on a real PostgreSQL database: two `Leases` (two nodes) on one database.

Each node's lease is taken with one statement, renewed by the heartbeat, lost when it expires,
given back on a clean stop; the takers run once per take, before the scope is served; the
leader lease moves to the other node when its holder stops beating.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from halo.cluster.leases import LEADER, Leases, Node
from halo.storage import HaloDB
from tests.storage_support import fresh_database
from tests.waiting import eventually

LEASE = 3.0  # seconds: short, so expiry is seen within the test; two beats (2 s) of a busy loop do not lose it
HANG = 60  # a deadline for a hang, not a measure: a lease lapses LEASE after its last beat


class Mirror:
    """A scope taker that records which scopes it was asked to bring up to date."""

    def __init__(self) -> None:
        self.taken: list[str] = []

    async def take(self, scope_id: str) -> None:
        self.taken.append(scope_id)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[HaloDB]:
    async with fresh_database(migrated=True) as url:
        halo_db = HaloDB(tmp_path / "unused.db", url)
        yield halo_db
        await halo_db.close()


def node(name: str) -> Node:
    return Node(name, "testhost", f"http://{name}")


async def test_a_free_scope_is_taken_once_and_then_served_without_asking_again(db: HaloDB) -> None:
    mirror = Mirror()
    # a long lease: this is about holding, not expiry; a 1 s lease can lapse between two calls
    # on a loaded machine, and then taking it again is right
    a = Leases(db, node("a"), 30.0, [mirror])
    await a.start()
    statements: list[str] = []
    from sqlalchemy import event

    event.listen(db.engine.sync_engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    assert await a.acquire("web:mom") is None
    assert mirror.taken == ["web:mom"]
    taking = len(statements)
    assert await a.acquire("web:mom") is None  # held: no round trip, no second take
    assert len(statements) == taking and mirror.taken == ["web:mom"]
    await a.stop()


async def test_a_scope_held_by_a_live_node_is_not_taken_and_its_holder_is_named(db: HaloDB) -> None:
    a, b = Leases(db, node("a"), LEASE), Leases(db, node("b"), LEASE)
    await a.start()
    await b.start()
    assert await a.acquire("web:mom") is None
    assert await b.acquire("web:mom") == "a"
    assert await b.acquire("web:dad") is None
    assert await a.acquire("web:dad") == "b"
    await a.stop()
    await b.stop()


async def test_the_heartbeat_keeps_the_lease_and_a_stopped_beat_lets_it_expire(db: HaloDB) -> None:
    a, b = Leases(db, node("a"), LEASE), Leases(db, node("b"), LEASE, [mirror := Mirror()])
    await a.join()  # a beats only when told: then stops, as a frozen or killed process does
    await b.start()
    assert await a.acquire("web:mom") is None
    renewed_until = time.monotonic() + 2 * LEASE
    while time.monotonic() < renewed_until:  # a beats at the heartbeat's pace, past two whole leases
        await a.beat()
        assert await b.acquire("web:mom") == "a"
        await asyncio.sleep(a.every)  # the heartbeat's own pace, not a synchronisation
    assert await eventually(lambda: _taken(b, "web:mom"), within=HANG, what="the lease to expire for b")
    assert mirror.taken == ["web:mom"]
    await a.beat()  # a wakes up: its renewal finds the lease gone, and it no longer serves the scope
    assert not a.holds("web:mom")
    assert await a.acquire("web:mom") == "b"
    await b.stop()


async def _taken(leases: Leases, scope_id: str) -> bool:
    return await leases.acquire(scope_id) is None


async def test_a_clean_stop_gives_every_lease_back_at_once(db: HaloDB) -> None:
    a, b = Leases(db, node("a"), 60.0), Leases(db, node("b"), 60.0)
    await a.start()
    await b.start()
    assert await a.acquire("web:mom") is None
    assert [n.id for n in await b.nodes()] == ["a", "b"]
    await a.stop()
    assert await b.acquire("web:mom") is None  # no waiting a minute for the lease to lapse
    assert [n.id for n in await b.nodes()] == ["b"]
    async with db.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM scope_leases WHERE node_id = 'a'"))).scalar() == 0
    await b.stop()


async def test_the_leader_lease_moves_when_its_holder_stops_beating(db: HaloDB) -> None:
    a, b = Leases(db, node("a"), LEASE), Leases(db, node("b"), LEASE)
    await a.join()  # a never beats: its leader lease lapses as a killed leader's does
    await b.start()
    assert await a.take_leader()
    assert not await b.take_leader()
    views = {n.id: n for n in await b.nodes()}
    assert views["a"].leader and not views["b"].leader
    assert await eventually(b.take_leader, within=HANG, what="b to become the leader")
    assert b.holds(LEADER)
    await b.stop()


class FailingOnce(Mirror):
    """PostgreSQL answers slowly once: the first take fails."""

    async def take(self, scope_id: str) -> None:
        if not self.taken:
            self.taken.append("failed")
            raise TimeoutError("the mirror could not be brought up to date")
        self.taken.append(scope_id)


async def test_a_taker_that_fails_leaves_the_scope_to_be_taken_again_not_served_stale(db: HaloDB) -> None:
    mirror = FailingOnce()
    a = Leases(db, node("a"), LEASE, [mirror])
    await a.start()
    with pytest.raises(TimeoutError):
        await a.acquire("web:mom")
    assert not a.holds("web:mom")
    assert await a.acquire("web:mom") is None
    assert mirror.taken == ["failed", "web:mom"]
    await a.stop()
