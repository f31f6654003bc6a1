"""Memory jobs' progress on PostgreSQL: `memory_jobs`, committed with the memory it produced.

Distillation and model extraction (memory/state.py's jobs) resume from a watermark into a
scope's transcript. On the embedded store that progress is in halo.db beside the files. On
PostgreSQL it belongs to the family, not to the process: a process that takes the family over
resumes where the last one stopped, instead of distilling every scope again and, worse, sending
its whole history to the extraction model again.

A watermark must never be ahead of the memory it stands for. So `RecordedJobStates` keeps the
family's states in memory (the active process is their only writer) and hands each change to
the markdown memory's rows (`RowMemory`), which writes the changed files and the changed
states in one transaction: a crash before it loses both, and the next process does that work
again; never only the watermark. A scope's states are read again from PostgreSQL when the
process takes the scope (`load_scope`, from the memory's take).

Graph memory's progress ("graph") stays in the local halo.db with the local graph it describes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from sqlalchemy import BigInteger, Column, Float, Integer, MetaData, String, Table, Text, delete, select

from halo.db_conn import Conn
from halo.storage.db import HaloDB
from halo.storage.family import FAMILY_COLUMN, FAMILY_ID_LENGTH
from memory.state import Job, JobState, JobStateStore

RECORDED_JOBS: frozenset[str] = frozenset({"distill", "extract"})

metadata = MetaData()
memory_jobs = Table(
    "memory_jobs",
    metadata,
    Column(FAMILY_COLUMN, String(FAMILY_ID_LENGTH), primary_key=True),
    Column("scope_id", String(200), primary_key=True),
    Column("job", String(16), primary_key=True),
    Column("offset", BigInteger, nullable=False),
    Column("runs", Integer, nullable=False),
    Column("items", Integer, nullable=False),
    Column("last_run", Float),
    Column("last_success", Float),
    Column("last_error", Text),
    Column("failures", Integer, nullable=False),
    Column("next_retry", Float),
    Column("pending", Text, nullable=False),  # JSON: byte ranges a failed run left to do
)

Key = tuple[str, str]  # (scope_id, job)


class JobChanges:
    """States to write (a key mapped to None: to delete) and whole scopes to delete, taken
    together by one flush."""

    def __init__(self, states: dict[Key, JobState | None], scopes: set[str]) -> None:
        self.states = states
        self.scopes = scopes

    def __bool__(self) -> bool:
        return bool(self.states or self.scopes)

    async def write(self, conn: Conn, family_id: str) -> None:
        """In the record's transaction: scopes deleted first, then each state written or deleted."""
        mine = memory_jobs.c.family_id == family_id
        for scope_id in sorted(self.scopes):
            await conn.execute(delete(memory_jobs).where(mine, memory_jobs.c.scope_id == scope_id))
        gone = [key for key, state in self.states.items() if state is None]
        for scope_id, job in gone:
            await conn.execute(
                delete(memory_jobs).where(mine, memory_jobs.c.scope_id == scope_id, memory_jobs.c.job == job)
            )
        rows = [_row(family_id, state) for state in self.states.values() if state is not None]
        if rows:
            from sqlalchemy.dialects.postgresql import insert as pg_insert  # PostgreSQL only (~2.3 MiB)

            statement = pg_insert(memory_jobs)
            columns = {c.name: statement.excluded[c.name] for c in memory_jobs.c if not c.primary_key}
            await conn.execute(
                statement.on_conflict_do_update(index_elements=list(memory_jobs.primary_key.columns), set_=columns),
                rows,
            )


class RecordedJobStates:
    """memory/state.py's job store on PostgreSQL: distillation's and extraction's states in
    memory, written by the memory record's flush; graph memory's in the local `local` store.
    Every method is safe from any thread and never waits on the database."""

    def __init__(self, db: HaloDB, local: JobStateStore, *, on_change: Callable[[], None] = lambda: None) -> None:
        self.db = db
        self.local = local
        self.on_change = on_change  # the record's flush is woken
        self._guard = threading.Lock()
        self._states: dict[Key, JobState] = {}
        self._pending: dict[Key, JobState | None] = {}
        self._pending_scopes: set[str] = set()

    # --- memory.state.JobStates ------------------------------------------------------

    def get(self, scope_id: str, job: Job) -> JobState:
        if job not in RECORDED_JOBS:
            return self.local.get(scope_id, job)
        with self._guard:
            return self._states.get((scope_id, job)) or JobState(scope_id, job)

    def put(self, state: JobState) -> None:
        if state.job not in RECORDED_JOBS:
            self.local.put(state)
            return
        key = (state.scope_id, state.job)
        with self._guard:
            self._states[key] = state
            self._pending[key] = state
        self.on_change()

    def all(self) -> list[JobState]:
        with self._guard:
            mine = list(self._states.values())
        local = [s for s in self.local.all() if s.job not in RECORDED_JOBS]
        return sorted([*mine, *local], key=lambda s: (s.scope_id, s.job))

    def delete_scope(self, scope_id: str) -> None:
        self.local.delete_scope(scope_id)
        with self._guard:
            for key in [k for k in self._states if k[0] == scope_id]:
                del self._states[key]
            for key in [k for k in self._pending if k[0] == scope_id]:
                del self._pending[key]
            self._pending_scopes.add(scope_id)
        self.on_change()

    def delete_job(self, scope_id: str, job: Job) -> None:
        if job not in RECORDED_JOBS:
            self.local.delete_job(scope_id, job)
            return
        with self._guard:
            self._states.pop((scope_id, job), None)
            self._pending[(scope_id, job)] = None
        self.on_change()

    def close(self) -> None:
        self.local.close()

    # --- the record's side -----------------------------------------------------------

    def take_changes(self) -> JobChanges:
        """What is not written yet; the record writes it with the files (or `give_back`s it)."""
        with self._guard:
            changes = JobChanges(self._pending, self._pending_scopes)
            self._pending, self._pending_scopes = {}, set()
        return changes

    def give_back(self, changes: JobChanges) -> None:
        """A flush failed: its changes wait for the next one, unless newer ones came meanwhile."""
        with self._guard:
            for key, state in changes.states.items():
                if key not in self._pending and key[0] not in self._pending_scopes:
                    self._pending[key] = state
            self._pending_scopes |= changes.scopes

    def has_changes(self) -> bool:
        with self._guard:
            return bool(self._pending or self._pending_scopes)

    async def load_scope(self, scope_id: str) -> None:
        """The scope's states as PostgreSQL has them (a take: another process may have moved them).
        Call after the record flushed: a change not written yet would be replaced."""
        await self._load([scope_id])

    async def load_all(self) -> None:
        await self._load(None)

    async def _load(self, scope_ids: Iterable[str] | None) -> None:
        query = select(memory_jobs).where(memory_jobs.c.family_id == self.db.family_id)
        wanted = None if scope_ids is None else set(scope_ids)
        if wanted is not None:
            query = query.where(memory_jobs.c.scope_id.in_(sorted(wanted)))
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(query)).mappings().all()
        loaded = {(row["scope_id"], row["job"]): _state(row) for row in rows}
        with self._guard:
            for key in [k for k in self._states if wanted is None or k[0] in wanted]:
                if key not in self._pending:
                    del self._states[key]
            for key, state in loaded.items():
                if key not in self._pending:
                    self._states[key] = state


def _row(family_id: str, state: JobState) -> dict[str, Any]:
    values = asdict(state)
    values["pending"] = json.dumps(state.pending)
    values[FAMILY_COLUMN] = family_id
    return values


def _state(row: Any) -> JobState:
    data = {k: v for k, v in dict(row).items() if k != FAMILY_COLUMN}
    data["pending"] = json.loads(data["pending"] or "[]")
    return JobState(**data)
