"""`halo storage migrate`'s two directions, each all or nothing.

- `to_postgres`: HALO_HOME → PostgreSQL. Migrating the schema, the copy and the check all
  happen in one transaction: a refusal or a failure rolls every bit of it back.
- `from_postgres`: PostgreSQL → HALO_HOME. The data is written into a staging folder inside
  HALO_HOME and checked there; only then is each file renamed into place, and a file it
  replaces (with `force`) is moved aside into `backups/before-migrate-<time>/`, not deleted.

The URL's password is never said: errors name the server as `render_as_string(hide_password=True)`.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import MetaData
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from halo.storage.audit_rows import audit_events
from halo.storage.db import CONNECT_TIMEOUT_SECONDS
from halo.storage.family import FAMILY_OPTION, bind_family
from halo.storage.job_rows import memory_jobs
from halo.storage.memory_rows import memory_files
from halo.storage.migrate import current_revision, head_revision, upgrade_in
from halo.storage.move.audit_part import AuditPart
from halo.storage.move.copy import Moved, Progress, copy_parts, occupied
from halo.storage.move.jobs_part import JobsPart
from halo.storage.move.memory_part import MemoryPart
from halo.storage.move.part import Embedded, MoveError, Part, Postgres
from halo.storage.move.tables import table_parts
from halo.storage.move.transcript_part import TranscriptPart
from halo.storage.refusal import refused, shown
from halo.storage.transcript_rows import transcript_lines
from transcripts.sqlite import backup_copy

HALO_DB = "halo.db"
# halo/cluster's tables: who runs and who holds what, true only while processes run; never a
# family's data, so never moved (tests/test_storage_move.py checks the names against cluster's)
RUNNING_STATE = frozenset({"nodes", "family_leases"})
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def parts_for(schema: MetaData, family_id: str) -> list[Part]:
    """Everything a move copies, in order: halo.db's tables, then the parts that are files in
    HALO_HOME (their tables are theirs, not halo.db's)."""
    files: list[Part] = [TranscriptPart(family_id), AuditPart(family_id), MemoryPart(family_id), JobsPart(family_id)]
    owned = frozenset({transcript_lines.name, audit_events.name, memory_files.name, memory_jobs.name})
    return [*table_parts(schema, family_id, skip=owned | RUNNING_STATE), *files]


def _engine(url: str, family_id: str | None) -> AsyncEngine:
    """With `family_id`, bound to that family as `HaloDB` is (halo/storage/family.py): on a
    database several families share, the move counts, reads, replaces and writes only its own."""
    options = {FAMILY_OPTION: family_id} if family_id else {}
    engine = create_async_engine(url, connect_args={"timeout": CONNECT_TIMEOUT_SECONDS}, execution_options=options)
    if family_id:
        bind_family(engine.sync_engine, family_id)
    return engine


@asynccontextmanager
async def _postgres(url: str, family_id: str | None, *, read_only: bool = False) -> AsyncIterator[AsyncConnection]:
    """One connection in one transaction (committed when the block ends without an error);
    a server that cannot be reached or refuses halo is a `MoveError` naming it."""
    engine = _engine(url, family_id)
    try:
        try:
            conn = await engine.connect()
        except (OSError, TimeoutError, DBAPIError) as exc:
            raise MoveError(refused(url, exc)) from None
        try:
            if read_only:  # one snapshot for the whole copy, however long it takes
                conn = await conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            async with conn.begin():
                yield conn
        except DBAPIError as exc:
            reason = getattr(exc, "orig", None) or exc
            raise MoveError(f"PostgreSQL at {shown(url)} failed: {reason}; nothing was changed") from None
        finally:
            await conn.close()
    finally:
        await engine.dispose()


@asynccontextmanager
async def _embedded(root: Path) -> AsyncIterator[Embedded]:
    """`root`'s halo.db (when it has one) in one transaction: a consistent read, or the
    staging copy's writes, committed when the block ends without an error."""
    path = root / HALO_DB
    if not path.exists():
        yield Embedded(root, None)
        return
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
    try:
        async with engine.begin() as conn:
            yield Embedded(root, conn)
    finally:
        await engine.dispose()


async def _reflect(conn: AsyncConnection) -> MetaData:
    schema = MetaData()
    await conn.run_sync(lambda sync: schema.reflect(sync))
    return schema


def _refusal(found: Sequence[tuple[str, int]], where: str) -> MoveError:
    listed = ", ".join(f"{name} ({n})" for name, n in found)
    return MoveError(f"{where} already holds halo's data: {listed}. Nothing was changed (use --force to replace it)")


async def to_postgres(
    home: Path, url: str, *, family_id: str, force: bool = False, progress: Progress | None = None
) -> list[Moved]:
    """Copy HALO_HOME's data into the PostgreSQL database at `url` (its schema migrated first)."""
    async with _postgres(url, family_id) as conn:
        await upgrade_in(conn)
        schema = await _reflect(conn)
        parts = parts_for(schema, family_id)
        target = Postgres(conn, schema)
        if not force and (found := await occupied(parts, target)):
            raise _refusal(found, f"PostgreSQL at {shown(url)}")
        async with _embedded(home) as source:
            return await copy_parts(parts, source, target, progress)


@asynccontextmanager
async def _postgres_at_head(url: str, family_id: str | None) -> AsyncIterator[tuple[Postgres, list[Part]]]:
    async with _postgres(url, family_id, read_only=True) as conn:
        found, head = await conn.run_sync(current_revision), head_revision()
        if found is None:
            raise MoveError(f"PostgreSQL at {shown(url)} holds no halo schema: there is nothing to copy")
        if found != head:
            raise MoveError(
                f"PostgreSQL at {shown(url)} is at schema revision {found}, this halo's is {head}: "
                "start this halo on it once (it upgrades the schema at start), then copy"
            )
        schema = await _reflect(conn)
        # the family id only fills a row an old halo.db lacks it in: PostgreSQL's rows carry theirs
        yield Postgres(conn, schema), parts_for(schema, "")


async def stage_from_postgres(
    home: Path, url: str, staging: Path, progress: Progress | None = None, *, family_id: str | None = None
) -> list[Moved]:
    """PostgreSQL's data (with `family_id`, that family's alone; without, the whole database)
    written into `staging` as HALO_HOME would hold it, and checked. halo.db starts as a copy
    of HALO_HOME's, so its tables PostgreSQL does not hold (distillation's progress) stay."""
    async with _postgres_at_head(url, family_id) as (source, parts):
        if (home / HALO_DB).exists():
            backup_copy(home / HALO_DB, staging / HALO_DB)
        else:
            sqlite3.connect(staging / HALO_DB).close()
        async with _embedded(staging) as target:
            return await copy_parts(parts, source, target, progress)


async def from_postgres(
    home: Path, url: str, *, family_id: str | None = None, force: bool = False, progress: Progress | None = None
) -> list[Moved]:
    """Copy the PostgreSQL database at `url` (with `family_id`, that family's rows) into
    HALO_HOME (created if need be)."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)  # noqa: ASYNC240 (once, before anything waits)
    async with _postgres_at_head(url, family_id) as (_, parts), _embedded(home) as existing:
        found = await occupied(parts, existing)
    if found and not force:
        raise _refusal(found, str(home))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    staging = home / f".migrate-{stamp}"
    staging.mkdir(mode=0o700)
    try:
        moved = await stage_from_postgres(home, url, staging, progress, family_id=family_id)
        replaced = [path for part in parts for path in part.local_paths(home)]
        _place(staging, home, replaced, home / "backups" / f"before-migrate-{stamp}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return moved


def _place(staging: Path, home: Path, replaced: list[Path], aside: Path) -> None:
    """Rename every staged file into `home`, once it is on disk (fsync'd). What it replaces
    goes to `aside` first, and so does each of `replaced` (the parts' own files the copy has
    no counterpart for: after `--force` the home holds what PostgreSQL holds, no more). A
    database goes with its WAL and shared-memory files: a new halo.db beside an old WAL
    would be read as damaged."""
    staged = sorted(p for p in staging.rglob("*") if p.is_file())
    for path in staged:
        _fsync(path)
    placed = [home / path.relative_to(staging) for path in staged]
    for dest in sorted({*placed, *replaced}):
        for old in (dest, *(dest.with_name(dest.name + s) for s in SQLITE_SIDE_FILES)):
            if old.exists():
                kept = aside / old.relative_to(home)
                kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.replace(old, kept)
    for path, dest in zip(staged, placed, strict=True):
        dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.replace(path, dest)
    for folder in sorted({dest.parent for dest in placed}):
        _fsync(folder)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
