"""Per-scope memory job state in `$HALO_HOME/halo.db`: watermarks, last run, errors, backoff.

A watermark is a byte offset into the scope's transcript (see transcripts.store): a job
resumes exactly where the last successful run stopped, across restarts. One row per
(scope, job); jobs are "distill" (deterministic rules), "extract" (the model) and "graph" (graph memory).
Blocking calls: run them off the event loop.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text, create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.schema import CreateTable

from transcripts.sqlite import durable_sqlite_connection, use_wal

Job = Literal["distill", "extract", "graph"]

BACKOFF_BASE_SECONDS = 30.0
BACKOFF_CAP_SECONDS = 600.0

_metadata = MetaData()
memory_jobs = Table(
    "memory_jobs",
    _metadata,
    Column("scope_id", String, primary_key=True),
    Column("job", String, primary_key=True),
    Column("offset", Integer, nullable=False, default=0),
    Column("runs", Integer, nullable=False, default=0),
    Column("items", Integer, nullable=False, default=0),
    Column("last_run", Float),
    Column("last_success", Float),
    Column("last_error", Text),
    Column("failures", Integer, nullable=False, default=0),
    Column("next_retry", Float),
    Column("pending", Text),  # JSON: byte ranges a failed run left to do (model extraction)
)


def backoff_seconds(failures: int) -> float:
    """30 s after the first failure, doubling, at most 10 minutes."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_BASE_SECONDS * 2 ** (failures - 1), BACKOFF_CAP_SECONDS)


@dataclass(frozen=True, slots=True)
class JobState:
    scope_id: str
    job: Job
    offset: int = 0  # the watermark: everything before it is done
    runs: int = 0
    items: int = 0  # transcript items processed, all runs together
    last_run: float | None = None
    last_success: float | None = None
    last_error: str | None = None
    failures: int = 0  # consecutive
    next_retry: float | None = None
    pending: list[list[int]] = field(default_factory=list)  # [[start, end], …] byte ranges not yet done

    def succeeded(self, now: float, offset: int, items: int, pending: list[list[int]] | None = None) -> JobState:
        return replace(
            self,
            offset=offset,
            runs=self.runs + 1,
            items=self.items + items,
            last_run=now,
            last_success=now,
            last_error=None,
            failures=0,
            next_retry=None,
            pending=self.pending if pending is None else pending,
        )

    def failed(self, now: float, error: str) -> JobState:
        failures = self.failures + 1
        return replace(
            self,
            runs=self.runs + 1,
            last_run=now,
            last_error=error,
            failures=failures,
            next_retry=now + backoff_seconds(failures),
        )

    def partly_failed(self, now: float, error: str, failures_before: int) -> JobState:
        """A run that moved on but left work (pending ranges) behind: report it and back off."""
        failures = failures_before + 1
        return replace(self, last_error=error, failures=failures, next_retry=now + backoff_seconds(failures))

    def waiting(self, now: float) -> bool:
        """In backoff: an automatic run must wait until next_retry."""
        return self.next_retry is not None and now < self.next_retry

    def as_status(self) -> dict[str, Any]:
        return {
            "watermark": self.offset,
            "runs": self.runs,
            "items": self.items,
            "last_run": _iso(self.last_run),
            "last_success": _iso(self.last_success),
            "last_error": self.last_error,
            "failures": self.failures,
            "next_retry": _iso(self.next_retry),
            "pending_ranges": len(self.pending),
        }


def _iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds") if ts is not None else None


class JobStates(Protocol):
    """Where the jobs' states are kept: `JobStateStore` (halo.db), or on PostgreSQL the family's
    rows, written with the memory they produced (halo/storage/job_rows.py). Blocking calls."""

    def get(self, scope_id: str, job: Job) -> JobState: ...

    def put(self, state: JobState) -> None: ...

    def all(self) -> list[JobState]: ...

    def delete_scope(self, scope_id: str) -> None: ...

    def delete_job(self, scope_id: str, job: Job) -> None: ...

    def close(self) -> None: ...


class JobStateStore:
    """The `memory_jobs` table. SQLite in WAL mode with a busy timeout, so a `halo distill` in a
    terminal and a running gateway can both use it."""

    def __init__(self, db_path: Path | None = None, *, url: str | None = None) -> None:
        if url is None:
            assert db_path is not None
            use_wal(db_path)
            url = f"sqlite:///{db_path}"
        self.engine: Engine = create_engine(url, connect_args={"timeout": 30} if url.startswith("sqlite") else {})
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._ready = False
        self._lock = threading.Lock()

    def _ensure(self) -> None:
        """The table, made on first use with one `CREATE TABLE IF NOT EXISTS` under `BEGIN
        IMMEDIATE` on SQLite. A plain DDL statement reads the schema first and then asks for the
        write lock; SQLite refuses that upgrade at once, without its busy wait, while another
        connection writes halo.db (the outbox), and a first `/status` under load answered 500
        "database is locked". Taking the write lock first waits like any other write."""
        if not self._ready:
            with self._lock:
                if not self._ready:
                    if self.engine.dialect.name == "sqlite":
                        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                            conn.exec_driver_sql("BEGIN IMMEDIATE")  # waits for the write lock
                            conn.execute(CreateTable(memory_jobs, if_not_exists=True))
                            conn.exec_driver_sql("COMMIT")
                    else:
                        with self.engine.begin() as conn:
                            conn.execute(CreateTable(memory_jobs, if_not_exists=True))
                    self._ready = True

    def get(self, scope_id: str, job: Job) -> JobState:
        self._ensure()
        with self.engine.connect() as conn:
            row = (
                conn.execute(select(memory_jobs).where(memory_jobs.c.scope_id == scope_id, memory_jobs.c.job == job))
                .mappings()
                .first()
            )
        return _from_row(row) if row else JobState(scope_id, job)

    def put(self, state: JobState) -> None:
        self._ensure()
        values = asdict(state)
        values["pending"] = json.dumps(state.pending)
        with self.engine.begin() as conn:
            updated = conn.execute(
                memory_jobs.update()
                .where(memory_jobs.c.scope_id == state.scope_id, memory_jobs.c.job == state.job)
                .values(**values)
            ).rowcount
            if not updated:
                conn.execute(memory_jobs.insert().values(**values))

    def all(self) -> list[JobState]:
        self._ensure()
        with self.engine.connect() as conn:
            rows = conn.execute(select(memory_jobs).order_by(memory_jobs.c.scope_id)).mappings().all()
        return [_from_row(r) for r in rows]

    def delete_scope(self, scope_id: str) -> None:
        """For purge: the scope's memory is gone, so is its progress."""
        self._ensure()
        with self.engine.begin() as conn:
            conn.execute(memory_jobs.delete().where(memory_jobs.c.scope_id == scope_id))

    def delete_job(self, scope_id: str, job: Job) -> None:
        """One job's progress (a purged graph starts again from the beginning)."""
        self._ensure()
        with self.engine.begin() as conn:
            conn.execute(memory_jobs.delete().where(memory_jobs.c.scope_id == scope_id, memory_jobs.c.job == job))

    def close(self) -> None:
        self.engine.dispose()


def _from_row(row: Any) -> JobState:
    data = dict(row)
    data["pending"] = json.loads(data["pending"] or "[]")
    return JobState(**data)


def _sqlite_pragmas(dbapi_connection: Any, _: Any) -> None:
    durable_sqlite_connection(dbapi_connection, busy_ms=30000, synchronous="FULL")
