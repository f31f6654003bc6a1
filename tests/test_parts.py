"""A built halo's parts stop in the reverse of their start, by construction (halo/parts.py).

Each part of a real built halo is wrapped so it notes when it has started and when it is about
to stop; the halo is then started and closed as `halo serve` does. On PostgreSQL the serving
parts start when the process takes the family and stop when it gives it up, as many times as
that happens, and the process-wide ones only once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.parts import Part
from halo.runtime.app import build_halo
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.storage_support import fresh_database
from tests.waiting import eventually


class Noted:
    """What started and what stopped, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def part(self, part: Part) -> Part:
        @asynccontextmanager
        async def running() -> AsyncIterator[None]:
            async with part.running():
                self.lines.append(f"start {part.name}")
                try:
                    yield
                finally:
                    self.lines.append(f"stop {part.name}")

        return Part(part.name, running, part.stage)

    def watch(self, halo: Halo) -> None:
        parts = halo.parts
        parts.always[:] = [self.part(p) for p in parts.always]
        parts.serving[:] = [self.part(p) for p in parts.serving]

        async def resources_close() -> None:  # pushed last: the first resource to close
            self.lines.append("resources close")

        parts.resources.push_async_callback(resources_close)

    def starts(self) -> list[str]:
        return [line.removeprefix("start ") for line in self.lines if line.startswith("start ")]

    def stops(self) -> list[str]:
        return [line.removeprefix("stop ") for line in self.lines if line.startswith("stop ")]


def names(parts: list[Part]) -> list[str]:
    return [p.name for p in parts]


@pytest.mark.own_store  # the embedded store: one process, serving from its start
async def test_every_part_stops_in_the_reverse_of_its_start(home: Path, fake_llm: FakeOpenAI) -> None:
    write_home(home, llm_yaml(fake_llm))
    halo = build_halo(load_settings(home))
    noted = Noted()
    noted.watch(halo)
    everything = names(halo.parts.always) + names(halo.parts.serving)
    try:
        await halo.start()
        assert noted.starts() == everything  # the build order: each part after what it uses
    finally:
        await halo.close()
    assert everything[0] == "halo.db" and everything[-1] == "catch-up"
    assert everything.index("outbox") < everything.index("reminder clock") < everything.index("adapter web")
    assert everything.index("home rules") < everything.index("adapter web")
    assert noted.stops() == list(reversed(everything))
    assert noted.lines[-1] == "resources close"  # what they hold closes after every part stopped


async def test_a_halo_built_and_never_started_closes_what_it_holds(home: Path, fake_llm: FakeOpenAI) -> None:
    write_home(home, llm_yaml(fake_llm))
    halo = build_halo(load_settings(home))
    noted = Noted()
    noted.watch(halo)
    await halo.close()
    assert noted.lines == ["resources close"]


@pytest.mark.own_store
async def test_the_two_starts_a_test_or_halo_chat_uses_stop_in_reverse_too(home: Path, fake_llm: FakeOpenAI) -> None:
    write_home(home, llm_yaml(fake_llm))
    halo = build_halo(load_settings(home))
    noted = Noted()
    noted.watch(halo)
    try:
        await halo.start_background()
        await halo.start_adapters()
        await halo.start_background()  # again: what runs already is not started twice
        started = noted.starts()
    finally:
        await halo.close()
    assert len(started) == len(set(started))
    assert "catch-up" not in started  # only a full start catches up
    assert noted.stops() == list(reversed(started))


@pytest.mark.postgres
async def test_the_serving_parts_start_and_stop_with_each_take_of_the_family(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with fresh_database(migrated=True) as url:
        home = tmp_path / "home"
        write_home(home, llm_yaml(fake_llm))
        halo = build_halo(load_settings(home, storage={"url": url, "lease_seconds": 2.0}))
        cluster = halo.cluster
        assert cluster is not None
        noted = Noted()
        noted.watch(halo)
        always, serving = names(halo.parts.always), names(halo.parts.serving)
        try:
            await halo.start()
            await eventually(lambda: cluster.active, what="this process holding the family")
            await cluster.activated()
            assert "adapter web" in always and "adapter web" not in serving  # a standby's requests are forwarded
            assert "scopes taken" in serving and "outbox" in serving
            assert noted.starts() == always + serving

            await cluster.give_up("the test takes the family away")
            assert noted.stops() == list(reversed(serving))  # the process-wide parts run on

            await eventually(lambda: cluster.active, what="the family taken again once the lease lapsed")
            await cluster.activated()
            assert noted.starts() == always + serving + serving
        finally:
            await halo.close()
        assert noted.stops() == list(reversed(serving)) + list(reversed(always + serving))
        assert noted.lines[-1] == "resources close"


@pytest.mark.postgres
async def test_halo_chat_on_postgresql_takes_the_family_without_the_doors_or_the_catch_up(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """`start_alone` (halo chat): the lease first, then the serving parts once it holds the family;
    no chat app, no home rules, and no catch-up of the chat apps' unanswered messages (it could
    send no reply to them)."""
    async with fresh_database(migrated=True) as url:
        home = tmp_path / "home"
        write_home(home, llm_yaml(fake_llm))
        halo = build_halo(load_settings(home, storage={"url": url}))
        cluster = halo.cluster
        assert cluster is not None
        noted = Noted()
        noted.watch(halo)
        serving = halo.parts.serving
        try:
            await halo.start_alone()
            assert cluster.active, "it holds the family when start_alone returns"
            started = noted.starts()
        finally:
            await halo.close()
        doors = {p.name for p in serving if p.stage == "door"}
        assert "home rules" in doors and not doors & set(started)
        assert "catch-up" in names(serving) and "catch-up" not in started
        assert {"scopes taken", "outbox", "reminder clock"} <= set(started)
        assert noted.stops() == list(reversed(started))
