"""HALO_HOME's markdown memory as a mirror of PostgreSQL's `memory_files` (storage.url set).

Two directions:

- `RecordedFiles`, the `FileRecord` every memory writer is handed: a write or delete of a
  file marks its path, from any thread; an async task writes the marked paths together, as
  the files are then (one transaction), at least once a second. `flush()` is the way to know
  a change is in the store of record: the gateway awaits it before it closes a turn that
  wrote memory, and the admin API before it answers. What is still behind (the after-turn
  work: a distillation, the day's log) is derived from the transcript, so a crash needs no
  journal here: the next process to take the scope distils again (memory/service.py
  `catch_up`).
- `MemoryMirror.take(scope_id)`: the scope's rows written into the local mirror where they
  differ (by sha256), local files the rows no longer have removed, then the scope's semantic
  index (derived data, local to the process) brought up to date from them. A process takes
  a scope before it first uses it. `join`, at start, does the family's own files (SOUL.md,
  USER.md); on a home's first start against the database it also uploads
  the home's memory files the database has not got (an embedded home switched to PostgreSQL,
  the default SOUL.md of the very first start), so nothing is lost.

A hand edit of a copy's file (a parent fixing MEMORY.md or USER.md) is found at the next take
by `SyncedHashes` (what each file was when it last matched the record) and written to
PostgreSQL if the record did not change meanwhile; if it did, the record wins and the edit is
kept beside the file. An edit is also carried when halo next writes that file (a writer reads
the file as it is).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from config.paths import scope_hash
from halo.storage.db import HaloDB
from halo.storage.job_rows import RecordedJobStates
from halo.storage.memory_rows import MemoryRows
from memory.mirror import (
    SCOPES,
    SOUL,
    MemoryFile,
    SyncedHashes,
    family_wide,
    local_files,
    note_written,
    read_local,
    recorded,
    refresh,
    scope_prefix,
    write_local,
)
from memory.scope_files import ScopeFiles
from memory.semantic import SemanticMemory
from memory.state import JobStateStore

log = logging.getLogger(__name__)

FLUSH_EVERY_SECONDS = 1.0
JOINED = "memory/.mirror-of"  # the family and database this home mirrors (no password)


def mirror_identity(db: HaloDB) -> str:
    """The family and database a home mirrors, as `JOINED` keeps it (no password)."""
    return f"{db.family_id} {db.engine.url.render_as_string(hide_password=True)}\n"


def has_served(home: Path, db: HaloDB) -> bool:
    """Has a process in this home served this family from this database before? Then its
    files hold only what came from PostgreSQL (asked before this start joins it)."""
    return read_local(home, JOINED) == mirror_identity(db)


class RecordedFiles:
    """Memory files' changes, written to `memory_files` behind the writers' backs."""

    def __init__(self, rows: MemoryRows, home: Path, *, every: float = FLUSH_EVERY_SECONDS) -> None:
        self.rows = rows
        self.home = home
        self.every = every
        self.failing: str | None = None  # the last flush's error while PostgreSQL refuses
        self._guard = threading.Lock()  # writers call from worker threads
        self._paths: set[str] = set()
        self._folders: set[str] = set()
        self._flushing = asyncio.Lock()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self.jobs: RecordedJobStates | None = None  # memory jobs' progress, written with the files
        self.synced = SyncedHashes(home)  # what each file was when it last matched the record

    def job_states(self, local: JobStateStore) -> RecordedJobStates:
        """The memory jobs' store on PostgreSQL: its changes go out with this record's files."""
        self.jobs = RecordedJobStates(self.rows.db, local, on_change=self._poke)
        return self.jobs

    # --- FileRecord ------------------------------------------------------------------

    def changed(self, path: Path) -> None:
        relative = self._relative(path)
        if relative is None or not recorded(relative):
            return
        self._mark(self._paths, relative)

    def removed_folder(self, folder: Path) -> None:
        relative = self._relative(folder)
        if relative is not None:
            self._mark(self._folders, relative.rstrip("/") + "/")

    def _mark(self, pending: set[str], relative: str) -> None:
        note_written(relative)
        with self._guard:
            pending.add(relative)
        self._poke()

    async def flush(self) -> None:
        async with self._flushing:
            with self._guard:
                paths, self._paths = self._paths, set()
                folders, self._folders = self._folders, set()
            # taken after the files: a job's state is never written before the files it produced
            jobs = self.jobs.take_changes() if self.jobs is not None else None
            if not paths and not folders and not jobs:
                return
            try:
                texts = await asyncio.to_thread(lambda: {p: read_local(self.home, p) for p in sorted(paths)})
                files = [MemoryFile.of(p, text) for p, text in texts.items() if text is not None]
                gone = [p for p, text in texts.items() if text is None]
                await self.rows.apply(files, gone, sorted(folders), jobs=jobs or None)
                matched: dict[str, str | None] = {f.path: f.sha256 for f in files} | dict.fromkeys(gone)
                await asyncio.to_thread(self.synced.matched, matched)
            except BaseException:
                with self._guard:  # nothing is lost: tried again on the next flush
                    self._paths |= paths
                    self._folders |= folders
                if jobs and self.jobs is not None:
                    self.jobs.give_back(jobs)
                raise

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """The timer that flushes; idempotent."""
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run())
        with self._guard:
            if self._paths or self._folders or (self.jobs is not None and self.jobs.has_changes()):
                self._wake.set()

    async def close(self) -> None:
        """Stop the timer and write what waits."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.flush()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self.every)  # gather the rest of this second's writes
            try:
                await self.flush()
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

    def _relative(self, path: Path) -> str | None:
        try:
            return path.relative_to(self.home).as_posix()
        except ValueError:
            return None


class MemoryMirror:
    """Makes this process's HALO_HOME hold what PostgreSQL holds, a scope at a time."""

    def __init__(self, record: RecordedFiles, files: ScopeFiles, semantic: SemanticMemory | None) -> None:
        self.record = record
        self.rows = record.rows
        self.files = files
        self.home = files.paths.home
        self.semantic = semantic
        self._joined = False
        self._joining = asyncio.Lock()

    async def join(self) -> None:
        """Once per process, before anything is taken (at start): the family's own files from
        PostgreSQL, and on a home's first start against this database, its memory files that
        PostgreSQL lacks uploaded, so turning `storage.url` on loses nothing. From then on the
        home is a mirror: what PostgreSQL no longer has is removed from it."""
        async with self._joining:
            if self._joined:
                return
            await self.record.start()
            if self.record.jobs is not None:
                await self.record.jobs.load_all()
            known = await self.rows.hashes()
            family = [f for p in (SOUL, "members/") for f in await self.rows.files_under(p) if family_wide(f.path)]
            identity = mirror_identity(self.rows.db)
            first = read_local(self.home, JOINED) != identity

            def mirror() -> tuple[list[MemoryFile], list[MemoryFile]]:
                seeds = [f for f in self._local_memory() if f.path not in known] if first else []
                edited = refresh(self.home, family, "", remove_others=False, synced=self.record.synced).hand_edited
                return seeds, edited

            seeds, edited = await asyncio.to_thread(mirror)
            if seeds:
                await self._upload(seeds)
                log.info("%d memory file(s) of this HALO_HOME added to PostgreSQL", len(seeds))
            await self._carry_hand_edits(edited)
            if first:
                await asyncio.to_thread(write_local, self.home, MemoryFile.of(JOINED, identity))
            self._joined = True

    async def _upload(self, files: list[MemoryFile]) -> None:
        await self.rows.write_many(files)
        await asyncio.to_thread(self.record.synced.matched, {f.path: f.sha256 for f in files})

    async def _carry_hand_edits(self, edited: list[MemoryFile]) -> None:
        """Files edited by hand in this home since they last matched PostgreSQL, which still holds
        what they were: the edits go to PostgreSQL, as halo's own writes do."""
        if edited:
            await self._upload(edited)
            log.info("memory: %d file(s) edited by hand here written to PostgreSQL: %s", len(edited),
                     ", ".join(f.path for f in edited))  # fmt: skip

    def _local_memory(self) -> list[MemoryFile]:
        soul = read_local(self.home, SOUL)
        return [
            *([MemoryFile.of(SOUL, soul)] if soul is not None else []),
            *local_files(self.home, "members/"),
            *local_files(self.home, f"{SCOPES}/"),
        ]

    async def take(self, scope_id: str) -> None:
        """The scope's files from PostgreSQL, then its semantic index from them. What this process
        wrote and has not flushed yet goes first: a scope written before its first take here (a
        /share into a group that had no message yet) is not rolled back to PostgreSQL's older copy."""
        await self.join()
        await self.record.flush()
        if self.record.jobs is not None:  # the jobs' progress as the last holder left it
            await self.record.jobs.load_scope(scope_id)
        prefix = scope_prefix(scope_hash(scope_id))
        wanted = await self.rows.files_under(prefix)

        def mirror() -> tuple[list[str], list[MemoryFile]]:
            with self.files.lock(scope_id):
                done = refresh(self.home, wanted, prefix, synced=self.record.synced)
                if done.changed:
                    self.files.refreshed(scope_id)
                return done.changed, done.hand_edited

        changed, edited = await asyncio.to_thread(mirror)
        if changed:
            log.info("memory of %s: %d file(s) refreshed from PostgreSQL", scope_id, len(changed))
        await self._carry_hand_edits(edited)
        if self.semantic is not None and self.semantic.enabled:
            await self.semantic.sync_scope(scope_id)
