"""Parts that start and stop themselves, and the stacks that run them (issue 34, item 5).

Each part that runs (the memory index's schedule, the outbox's worker, an adapter, the family
lease, …) is an async context: entering it starts the part, leaving it stops it. The composition
root (halo/runtime/app.py) lists the parts in build order; `Parts` enters them in an
`AsyncExitStack` in that order, so a stop is the reverse of the start by construction, as
aiohttp's `cleanup_ctx` does.

Two stacks, because a process on PostgreSQL serves the family only while it holds the family
lease, and may take it and lose it many times in one life:

- `always`: what every process runs from start to stop (the schema checked, memory's timers,
  the index's schedule, graph memory, halo.yaml's watch, the adapters a person waits on, and
  on PostgreSQL the family lease itself);
- `serving`: what only the process serving the family runs (the scopes' copies brought up to
  date, the outbox's worker, the schedules, the home rules, the chat apps and MQTT, the
  catch-up). Entered on `activate`, left on `deactivate`; on the embedded store (one process)
  entered at start and left at stop.

What a part holds open whether or not it was started (halo.db's connections, the transcripts'
files, the models' HTTP clients, the index's SQLite files) is not a part's: the root pushes each
close onto `resources` as it builds the thing, and `close` runs them after the parts stopped, in
the reverse of build order. A halo that was built and never started (a CLI command, a test)
closes its resources all the same.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from halo.cluster.cluster import Cluster
    from halo.outbound.delivery import Delivery
    from halo.port import Adapter

log = logging.getLogger(__name__)

Stage = Literal["background", "schedule", "door", "take", "catch-up"]
Close = Callable[[], Awaitable[object] | None]


class FamilyServedElsewhere(Exception):
    """Another process serves the family (PostgreSQL): a halo that acts alone (`halo chat`) would
    split the family's chats beside it. `address`: where that process answers."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        super().__init__(f"another halo serves this family{f' at {address}' if address else ''}")


@dataclass(frozen=True, slots=True)
class Part:
    """One part that runs. `running` makes a fresh context each time it is entered (a serving
    part is entered again after each take of the family).

    `stage` says which start enters it: `background` (`start_background`: the work behind the
    doors), `schedule` (a serving part on a timer: `start_background` too, but on PostgreSQL only
    once this process holds the family, so no standby fires a reminder),
    `door` (`start_adapters`: the adapters and the home rules, how messages come in) or, for a
    serving part, `take` (when this process takes the family: `start` on the embedded store,
    `activate` or `activate_alone` on PostgreSQL — the scopes taken) or `catch-up` (only when it
    serves the family in full, doors and all: `start`, `activate` — what a crash left unanswered)."""

    name: str
    running: Callable[[], AbstractAsyncContextManager[object]]
    stage: Stage = "background"


@asynccontextmanager
async def started(start: Callable[[], Awaitable[object] | None]) -> AsyncIterator[None]:
    """A part whose stop is its close (memory's timers, the index's schedule, graph memory): it
    starts here and stops when the halo's resources close."""
    await _called(start)
    yield


@asynccontextmanager
async def stopped_by(
    start: Callable[[], Awaitable[object] | None], stop: Callable[[], Awaitable[object] | None]
) -> AsyncIterator[None]:
    """A part with a start and a stop method of its own (sync or async)."""
    await _called(start)
    try:
        yield
    finally:
        await _called(stop)


def resources(*closes: Close) -> AsyncExitStack:
    """What the root built that holds something open, each close given in build order: they run
    in reverse when the halo closes (the last built, which may use the others, first)."""
    stack = AsyncExitStack()
    for close in closes:
        stack.push_async_callback(_called, close)
    return stack


async def _nothing_to_start() -> None:
    return None


async def _called(call: Close) -> None:
    result = call()
    if inspect.isawaitable(result):
        await result


def adapter_part(adapter: Adapter, delivery: Delivery, *, sends_when_active: bool) -> Part:
    """An adapter started (a chat app's polling, MQTT's subscription) and stopped; it finishes
    the updates in hand at its stop, and their replies go out through it. `sends_when_active`:
    a chat app on several processes sends from the active process only, so the outbox hands it
    rows only while it runs here."""

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        if sends_when_active:
            delivery.register(adapter.platform, adapter)
        await adapter.start()
        try:
            yield
        finally:
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping adapter %s failed", adapter.platform)
            if sends_when_active:
                delivery.unregister(adapter.platform)  # what is queued waits for the next active process

    return Part(f"adapter {adapter.platform}", running, "door")


class Parts:
    """Runs the parts: `always` for the process's life, `serving` while it serves the family."""

    def __init__(
        self,
        always: list[Part],
        serving: list[Part],
        resources: AsyncExitStack,
        cluster: Cluster | None = None,
    ) -> None:
        self.always = always
        self.serving = serving
        self.resources = resources
        self.cluster = cluster
        self._running = AsyncExitStack()
        self._entered: set[str] = set()  # of `always`
        self._serving: AsyncExitStack | None = None
        self._serving_entered: set[str] = set()
        self._serving_closer = False  # the process stack stops serving (no family lease does)

    async def start(self) -> None:
        """Embedded: serve at once. PostgreSQL: a warm standby (built, its database reached),
        which serves once it holds the family (`activate`, from the family lease)."""
        serving_here = self.cluster is None
        await self.start_background(serving=serving_here)
        await self.start_adapters()
        if serving_here:
            await self._serve("take", "catch-up")

    async def start_background(self, *, serving: bool = True) -> None:
        """The work behind the doors; `serving`: the serving part of it too (the outbox, the
        schedules), as a halo that acts alone does (`halo chat`, tests)."""
        await self._enter_always("background")
        if serving:
            schedules: tuple[Stage, ...] = ("schedule",) if self.cluster is None else ()
            await self._serve("background", *schedules)

    async def start_alone(self) -> None:
        """A halo that acts alone (`halo chat`): the work behind the doors and its serving part,
        without the doors. On PostgreSQL only as the process serving the family: it joins the
        family's processes and takes the family lease, so its writes are fenced and a `halo serve`
        started meanwhile waits as a standby; when another process serves the family it raises
        FamilyServedElsewhere before anything of the family was written here."""
        if self.cluster is None:
            await self.start_background()
            return
        await self._enter_always("background")
        await self.hold_family(self.activate_alone)

    async def hold_family(self, activate: Callable[[], Awaitable[None]] | None = None) -> None:
        """On PostgreSQL, a halo that acts alone (a CLI command) takes the family lease first, so
        its writes are fenced and no `halo serve` serves beside it; `activate` runs once it holds
        the family (nothing more by default). FamilyServedElsewhere when another process serves
        it. Nothing on the embedded store (one process)."""
        cluster = self.cluster
        if cluster is None:
            return
        await self._running.enter_async_context(self._family_lease(cluster, activate or _nothing_to_start))
        await cluster.activated()  # the first beat took the family, or saw who holds it
        if not cluster.active:
            if cluster.problem is not None:
                from halo.storage.db import StorageUnavailable

                raise StorageUnavailable(cluster.problem)
            holder = cluster.holder
            raise FamilyServedElsewhere(holder.address if holder is not None else None)

    async def start_adapters(self) -> None:
        """The doors: on PostgreSQL the adapters every process runs, then the family lease (it
        activates the rest); on the embedded store the home rules and every adapter."""
        await self._enter_always("door")
        if self.cluster is None:
            await self._serve("door")
        elif not self.cluster.started:
            await self._running.enter_async_context(self._family_lease(self.cluster))

    @asynccontextmanager
    async def _family_lease(
        self, cluster: Cluster, activate: Callable[[], Awaitable[None]] | None = None
    ) -> AsyncIterator[None]:
        """Join the family's processes: a standby until this one holds the family. At a stop it
        takes nothing and starts nothing first, then stops serving under the epoch it still
        holds and renews; the lease lapses when the resources close (`Cluster.stop`), after
        every write."""
        try:
            async with cluster.running(activate or self.activate, self.deactivate):
                yield
        finally:
            await self.deactivate()

    async def activate(self) -> None:
        """This process took the family (its writes carry the new epoch): every serving part not
        running yet starts, in order — every scope's copy brought up to date from the store of
        record, the outbox, the schedules, the home rules, the chat apps, the catch-up."""
        await self._serve("background", "schedule", "door", "take", "catch-up")
        log.warning("serving the family: the outbox, the chat apps and the schedules run here")

    async def activate_alone(self) -> None:
        """`start_alone`'s take of the family: everything `activate` starts but the doors and the
        catch-up (the chat apps' unanswered messages wait for a `halo serve`, which has them)."""
        await self._serve("background", "schedule", "take")

    async def deactivate(self) -> None:
        """This process no longer serves the family: the serving parts stop, in reverse."""
        serving, self._serving = self._serving, None
        self._serving_entered = set()
        if serving is not None:
            await serving.aclose()

    async def close(self) -> None:
        """Every part stopped in the reverse of its start, then every resource closed in the
        reverse of its build."""
        try:
            await self._running.aclose()
        finally:
            await self.resources.aclose()

    async def _enter_always(self, stage: Stage) -> None:
        for part in self.always:
            if part.stage == stage and part.name not in self._entered:
                self._entered.add(part.name)
                await self._running.enter_async_context(part.running())

    async def _serve(self, *stages: Stage) -> None:
        if self._serving is None:
            self._serving = AsyncExitStack()
            if not self._serving_closer and (self.cluster is None or not self.cluster.started):
                self._serving_closer = True  # else the family lease's part stops serving, after `closing`
                self._running.push_async_callback(self.deactivate)
        stack = self._serving
        for part in self.serving:
            if part.stage in stages and part.name not in self._serving_entered:
                self._serving_entered.add(part.name)
                await stack.enter_async_context(part.running())


class InBackground:
    """A part that is one piece of work run beside the others (the catch-up: a model call must not
    hold up the start); a stop cancels it, and `task` is there to be awaited (tests)."""

    def __init__(self, name: str, work: Callable[[], Awaitable[object]]) -> None:
        self.name = name
        self.work = work
        self.task: asyncio.Task[object] | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self.task = asyncio.create_task(self._run(), name=self.name)
        try:
            yield
        finally:
            if not self.task.done():
                self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _run(self) -> object:
        return await self.work()
