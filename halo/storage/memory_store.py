"""The markdown memory on PostgreSQL (storage.url set): `memory_files` rows, held in memory.

`RowMemory` is the `memory.store.MemoryStore` every memory reader and writer is handed on
PostgreSQL. No file is kept: the process serving the family loads the family's own files
(SOUL.md, USER.md) when it takes the family (`join`) and each scope's when it takes the scope
(`take`); a scope first touched from a worker thread before its take is loaded then. A write
changes the held text at once and marks its path; an async task writes the marked paths as
they are then (one transaction, with the memory jobs' progress) at least once a second.
`flush()` is how to know a change is in the store of record: the gateway awaits it before it
closes a turn that wrote memory, and the admin API before it answers. What is still behind (a
distillation, the day's log) is derived from the transcript: the next process to take the
scope distils again (memory/service.py `catch_up`).

A write the database refuses because this process no longer holds the family (`Fenced`) is
dropped with everything held: a stale process writes nothing more, and takes again from the
rows when it holds the family next.

A home that kept memory files before `storage.url` was set: at its first `join` the files the
database lacks are uploaded, those the database holds the same are removed, and any other is
left where it is, unread, with a warning (`halo export` writes the database's version).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from halo.storage.db import Fenced, HaloDB
from halo.storage.job_rows import RecordedJobStates
from halo.storage.memory_rows import MemoryRows
from memory.files import Transform
from memory.state import JobStateStore
from memory.store import (
    SCOPES,
    SOUL,
    MemoryFile,
    Stamp,
    local_files,
    note_written,
    read_local,
    recorded,
    scope_folder,
    storable,
    write_local,
)
from transcripts.text import clean_text

log = logging.getLogger(__name__)

FLUSH_EVERY_SECONDS = 1.0
LOAD_TIMEOUT = 30.0  # a worker thread waiting for a scope's rows
FAMILY = ""  # the unit of SOUL.md and the members' USER.md
JOINED = "memory/.mirror-of"  # the family and database this home has served (no password)
OLD_MANIFESTS = ".synced.json"  # what the per-process mirror of earlier halos kept beside the files


def mirror_identity(db: HaloDB) -> str:
    """The family and database a home serves, as `JOINED` keeps it (no password)."""
    return f"{db.family_id} {db.engine.url.render_as_string(hide_password=True)}\n"


def has_served(home: Path, db: HaloDB) -> bool:
    """Has a process in this home served this family from this database before? Then what files
    of the family it still has came from PostgreSQL (asked before this start joins it)."""
    return read_local(home, JOINED) == mirror_identity(db)


def _storable(text: str) -> str:
    """As a row holds it: no lone surrogate, no NUL."""
    return storable(clean_text(text))


def unit_of(relative: str) -> str:
    """What is loaded together: a scope's folder, or the family's own files."""
    if relative.startswith(f"{SCOPES}/"):
        return "/".join(relative.split("/")[:3]) + "/"
    return FAMILY


@dataclass(frozen=True, slots=True)
class Held:
    """One file as this process holds it."""

    text: str
    stamp: Stamp

    @classmethod
    def of(cls, text: str) -> Held:
        return cls(text, Stamp(time.time(), len(text.encode("utf-8"))))


class RowMemory:
    """The family's memory files, held by the process serving it and written behind to rows."""

    def __init__(self, rows: MemoryRows, home: Path, *, every: float = FLUSH_EVERY_SECONDS) -> None:
        self.rows = rows
        self.home = home  # only for a home's files from before storage.url (`settle_home`)
        self.every = every
        self.failing: str | None = None  # the last flush's error while PostgreSQL refuses
        self.jobs: RecordedJobStates | None = None  # memory jobs' progress, written with the files
        self._guard = threading.RLock()  # writers call from worker threads
        self._units: dict[str, dict[str, Held]] = {}  # the units held (`unit_of`), each by path
        self._paths: set[str] = set()  # changed since the last flush
        self._folders: set[str] = set()  # purged since the last flush
        self._locks: dict[str, threading.RLock] = {}
        self._flushing = asyncio.Lock()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._settled = False

    def job_states(self, local: JobStateStore) -> RecordedJobStates:
        """The memory jobs' store on PostgreSQL: its changes go out with this store's files."""
        self.jobs = RecordedJobStates(self.rows.db, local, on_change=self._poke)
        return self.jobs

    # --- MemoryStore: reads ----------------------------------------------------------

    def text(self, relative: str) -> str | None:
        held = self._held(relative)
        return held.text if held is not None else None

    def stamp(self, relative: str) -> Stamp | None:
        held = self._held(relative)
        return held.stamp if held is not None else None

    def names(self, prefix: str) -> list[str]:
        """Only the prefix's unit is looked at (a scope's documents each turn: not every file held)."""
        self._hold(prefix)
        with self._guard:
            return sorted(p for p in self._units.get(unit_of(prefix), {}) if p.startswith(prefix))

    def holds(self, relative: str) -> bool:
        """Are this path's rows held here (a read or write would not have to load them)?"""
        with self._guard:
            return unit_of(relative) in self._units

    def _held(self, relative: str) -> Held | None:
        self._hold(relative)
        with self._guard:
            return self._units.get(unit_of(relative), {}).get(relative)

    # --- MemoryStore: writes ---------------------------------------------------------

    def write(self, relative: str, text: str, *, durable: bool = True) -> None:
        if not recorded(relative):
            raise ValueError(f"{relative!r} is not a memory file")
        self._writable(relative)
        with self._guard:
            self._unit(relative)[relative] = Held.of(_storable(text))
        self._changed(relative)

    def append(self, relative: str, block: str) -> int:
        self._writable(relative)
        added = _storable(block)
        with self._guard:
            files = self._unit(relative)
            if (before := files.get(relative)) is None:
                raise FileNotFoundError(relative)
            size = before.stamp.size + len(added.encode("utf-8"))
            files[relative] = Held(before.text + added, Stamp(time.time(), size))
        self._changed(relative)
        return size

    def update(self, relative: str, transform: Transform, *, durable: bool = True) -> tuple[str, str]:
        self._writable(relative)
        with self._guard:  # nothing else changes the text between the read and the write
            files = self._unit(relative)
            before = held.text if (held := files.get(relative)) is not None else ""
            after = transform(before)
            if after != before:
                files[relative] = Held.of(_storable(after))
        if after != before:
            self._changed(relative)
        return before, after

    def delete(self, relative: str) -> None:
        self._writable(relative)
        with self._guard:
            self._unit(relative).pop(relative, None)
        self._changed(relative)

    def delete_under(self, prefix: str) -> int:
        """Every file under `prefix` (a scope purged), here and in the rows, whether held or not."""
        with self._guard:
            files = self._units.get(unit_of(prefix), {})
            gone = [p for p in files if p.startswith(prefix)]
            for relative in gone:
                del files[relative]
            self._paths -= set(gone)
            self._folders.add(prefix)
        note_written(prefix)
        self._poke()
        return len(gone)

    def lock(self, scope_id: str) -> threading.RLock:
        """One writer per scope in this process: only the process serving the family writes."""
        with self._guard:
            return self._locks.setdefault(scope_id, threading.RLock())

    def where(self, relative: str) -> str:
        return f"PostgreSQL memory_files: {relative} (`halo export` writes it as markdown)"

    def _writable(self, relative: str) -> None:
        """Load the path's unit, or refuse: a write into what is not held would replace rows unseen."""
        self._hold(relative)
        if not self.holds(relative):
            raise RuntimeError(f"memory {unit_of(relative) or 'of the family'} is not held by this process")

    def _unit(self, relative: str) -> dict[str, Held]:
        """The files of the path's unit (held: `_writable` first; under the guard)."""
        return self._units[unit_of(relative)]

    def _changed(self, relative: str) -> None:
        note_written(relative)
        with self._guard:
            self._paths.add(relative)
        self._poke()

    # --- loading from the rows -------------------------------------------------------

    def _hold(self, relative: str) -> None:
        """Load the path's unit if it is not held yet: at once from a worker thread; on the
        event loop a scope must have been taken (a read there would otherwise block it)."""
        unit = unit_of(relative)
        if self.holds(relative):
            return
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed():
            log.warning("memory %s read before its scope was taken; it looks empty", unit or "of the family")
            return
        asyncio.run_coroutine_threadsafe(self.load(unit), loop).result(LOAD_TIMEOUT)

    async def load(self, unit: str) -> None:
        """The unit's rows, held here; what was changed here and is not written yet is kept."""
        self._loop = asyncio.get_running_loop()
        if unit == FAMILY:
            found = [f for p in (SOUL, "members/") for f in await self.rows.files_under(p) if unit_of(f.path) == FAMILY]
        else:
            found = await self.rows.files_under(unit)
        with self._guard:
            purged = tuple(self._folders)  # rows a purge not written yet still holds
            fresh = {f.path: Held.of(f.content) for f in found if not f.path.startswith(purged)}
            held = self._units.get(unit, {})
            for relative in (p for p in self._paths if unit_of(p) == unit):  # changed here, not written yet
                if relative in held:
                    fresh[relative] = held[relative]
                else:
                    fresh.pop(relative, None)
            self._units[unit] = fresh

    async def ready(self, scope_id: str | None) -> None:
        """Hold the scope's files and the family's own here, loading what is not held yet."""
        self._loop = asyncio.get_running_loop()
        for unit in (FAMILY, *([scope_folder(scope_id)] if scope_id is not None else [])):
            if not self.holds(unit):
                await self.load(unit)

    async def join(self) -> None:
        """When this process takes the family: the flush timer, the memory jobs' states, and the
        family's own files from the rows (a home's files from before storage.url settled first)."""
        await self.start()
        if self.jobs is not None:
            await self.jobs.load_all()
        if not self._settled:
            await self.settle_home()
            self._settled = True
        await self.load(FAMILY)

    async def take(self, scope_id: str) -> None:
        """The scope's files as the rows hold them (another process may have written them), after
        what this process wrote is out."""
        await self.flush()
        if self.jobs is not None:  # the jobs' progress as the last holder left it
            await self.jobs.load_scope(scope_id)
        if not self.holds(SOUL):  # a halo that answers without having joined (a test's, a CLI's)
            await self.load(FAMILY)
        await self.load(scope_folder(scope_id))

    async def release(self) -> None:
        """This process stops serving the family: what it wrote goes out if it still may (else it
        is dropped: a newer holder writes now), and nothing held is current any more."""
        try:
            await self.flush()
        except Exception as exc:  # fenced, or the database gone: the next holder distils again
            log.warning("memory: %d change(s) not written as this process let go of the family: %s",
                        len(self._paths), exc)  # fmt: skip
        self._forget()

    def _forget(self) -> None:
        with self._guard:
            self._units.clear()
            self._paths.clear()
            self._folders.clear()

    async def settle_home(self) -> None:
        """A home's memory files from before storage.url (or from a per-process mirror of an
        earlier halo): uploaded where the rows lack them (only on a home that never served this
        database: otherwise a missing row was deleted on purpose), removed where the rows hold
        the same, left with a warning where they differ."""
        db = self.rows.db
        served = has_served(self.home, db)
        local = await asyncio.to_thread(lambda: list(local_files(self.home)))
        known = await self.rows.hashes()
        missing = [f for f in local if f.path not in known] if not served else []
        if missing:
            await self.rows.write_many(missing)
            known |= {f.path: f.sha256 for f in missing}
            log.info("%d memory file(s) of this HALO_HOME added to PostgreSQL", len(missing))
        same = [f.path for f in local if known.get(f.path) == f.sha256]
        differ = [f.path for f in local if f.path in known and known[f.path] != f.sha256]

        def tidy() -> None:
            for relative in same:
                (self.home / relative).unlink(missing_ok=True)
            for manifest in [self.home / "memory" / OLD_MANIFESTS, *(self.home / SCOPES).glob(f"*/{OLD_MANIFESTS}")]:
                manifest.unlink(missing_ok=True)
            if not served:
                write_local(self.home, MemoryFile.of(JOINED, mirror_identity(db)))

        await asyncio.to_thread(tidy)
        if differ:
            log.warning(
                "memory: %d file(s) in %s differ from PostgreSQL and are not read (PostgreSQL keeps the memory; "
                "`halo export` writes its version): %s",
                len(differ),
                self.home,
                ", ".join(differ),
            )

    # --- writing behind --------------------------------------------------------------

    async def flush(self) -> None:
        async with self._flushing:
            with self._guard:
                paths, self._paths = self._paths, set()
                folders, self._folders = self._folders, set()
                held = {p: self._units.get(unit_of(p), {}).get(p) for p in sorted(paths)}
            # taken after the files: a job's state is never written before the files it produced
            jobs = self.jobs.take_changes() if self.jobs is not None else None
            if not paths and not folders and not jobs:
                return
            files = [MemoryFile.of(p, h.text) for p, h in held.items() if h is not None]
            gone = [p for p, h in held.items() if h is None]
            try:
                await self.rows.apply(files, gone, sorted(folders), jobs=jobs or None)
            except Fenced:
                log.warning("memory: this process no longer holds the family; %d change(s) dropped", len(paths))
                self._forget()
                raise
            except BaseException:
                with self._guard:  # nothing is lost: tried again on the next flush
                    self._paths |= paths
                    self._folders |= folders
                if jobs and self.jobs is not None:
                    self.jobs.give_back(jobs)
                raise

    async def start(self) -> None:
        """The timer that flushes; idempotent."""
        self._loop = asyncio.get_running_loop()
        if self._task is not None:
            return
        self._task = self._loop.create_task(self._run())
        with self._guard:
            if self._paths or self._folders or (self.jobs is not None and self.jobs.has_changes()):
                self._wake.set()

    async def close(self) -> None:
        """Stop the timer and write what waits."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with suppress(Fenced):
            await self.flush()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self.every)  # gather the rest of this second's writes
            try:
                await self.flush()
            except Fenced:
                continue  # dropped: this process writes again only once it holds the family
            except Exception as exc:
                if self.failing is None:  # said once per outage, not every second
                    log.exception("could not write memory files to PostgreSQL; trying again every second")
                self.failing = f"{type(exc).__name__}: {exc}"
                self._wake.set()
            else:
                if self.failing is not None:
                    log.info("memory files are written to PostgreSQL again")
                self.failing = None

    def _poke(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)
