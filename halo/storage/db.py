"""halo.db: the small durable state of the core and the adapters (the outbox, pairing, group
state, tasks, approvals, home rules, reminders, lists, the adapters' seen ids), through
SQLAlchemy Core on one of two backends, each connection handed out as a `halo.db_conn.Conn`:

- SQLite, the file `$HALO_HOME/halo.db` (the default), through Core without the asyncio
  extension (halo/storage/sqlite.py: that package loads the ORM). Each store declares its own
  `MetaData`; its tables are created on first use (`create_all`), and a file from before
  `family_id` gets the column added.
- PostgreSQL (`storage.url`). The schema is Alembic's (halo/storage/migrations), brought to
  head once before first use under an advisory lock; a table no revision creates is an error
  that names it, never created on the fly.

Every table carries `family_id` (halo/storage/family.py); on PostgreSQL the engine is bound to
the family, so every statement sees only its rows, and row-level security holds the same line
in the database. Writes take turns in-process: SQLite has one writer at a time, and the
stores' read-then-write steps rely on it on both backends.
Commits are durable (SQLite: synchronous=FULL) — an outgoing message or a processed-update
mark must survive a power cut.

Fencing (PostgreSQL, `fence`): one process at a time is the family's active one, and each
take of the family raises its epoch (halo/cluster). Each connection says which epoch it holds
(`halo.epoch`, set at checkout when the fence's epoch changed), and a statement trigger on every
family table (migration 0011) locks the family's lease row `FOR KEY SHARE` and refuses the
statement unless that is the family's epoch. A take locks the row `FOR UPDATE`, so it waits for
the writes already past the check, and every write after it is refused: `Fenced`. A process
that lost its family (paused, cut off) cannot write one more row, whatever it still believes;
one that knows it holds nothing is refused here, without a round trip. The check rides on the
write itself, so a fenced one-statement write is still one round trip.
"""

from __future__ import annotations

import asyncio
import errno
import math
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, MetaData, event, inspect, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.util import greenlet_spawn

from halo.db_conn import Conn
from halo.storage.family import FAMILY_COLUMN, FAMILY_ID_LENGTH, FAMILY_OPTION, bind_family, carry_family
from halo.storage.refusal import refused
from halo.storage.sqlite import SqliteEngine
from transcripts.sqlite import durable_sqlite_connection, use_wal

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

CONNECT_TIMEOUT_SECONDS = 10  # PostgreSQL: a server that does not answer stops the start this soon
POOL_SIZE = 10  # PostgreSQL: connections kept open (SQLAlchemy's default, 5, churned under 8 members at once)
POOL_OVERFLOW = 10  # and opened beyond them at a peak, closed after
DEFAULT_FAMILY = "family"  # what `family.name`'s default ("Family") becomes as a slug


class SchemaError(RuntimeError):
    """A store's table that PostgreSQL's migrations do not create."""


class StorageUnavailable(RuntimeError):
    """PostgreSQL could not be reached or refused halo at start: said with the URL, never its password."""


class Fenced(RuntimeError):
    """This process does not hold its family (a newer epoch exists, or it never took one): the
    write was refused and nothing of it is stored."""


EPOCH_SETTING = "halo.epoch"  # PostgreSQL: the epoch the connection's writes carry, read by the fence trigger
NOT_HELD = "-1"  # no epoch is -1: every family write on the connection is refused
FENCED_SQLSTATE = "HL409"  # raised by the fence trigger (migration 0011)


@dataclass(slots=True)
class Fence:
    """The epoch this process's writes carry: None while it does not hold the family.
    `on_refused` is told when a write found a newer epoch (the process learns it is stale)."""

    epoch: int | None = None
    on_refused: list[Callable[[int | None], None]] = field(default_factory=list)
    lapses_at: float = math.inf  # time.monotonic() when the lease lapses unless renewed first

    def held_now(self) -> bool:
        """Held, and not lapsed by this process's own clock: a process thawed after a long pause
        knows it may have lost the family before any beat says so (it polls nothing meanwhile)."""
        return self.epoch is not None and time.monotonic() < self.lapses_at


def _network_error(exc: BaseException) -> bool:
    """A socket that failed (refused, reset, unreachable, timed out, a name not resolved), not a
    file: a MEMORY.md that is a folder is an OSError too, and halo's own fault, not the database's."""
    if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror):
        return True
    return isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS


_NETWORK_ERRNOS = frozenset(
    {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT}
)


def unreachable(exc: BaseException) -> bool:
    """PostgreSQL could not be reached (refused, reset, timed out): not a wrong statement."""
    if _network_error(exc):
        return True
    if isinstance(exc, DBAPIError):
        return bool(exc.connection_invalidated) or unreachable_cause(exc.orig)
    return unreachable_cause(exc.__cause__)


def unreachable_cause(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 8:
        if _network_error(exc):
            return True
        name = type(exc).__name__
        if name in ("ConnectionDoesNotExistError", "InterfaceError", "CannotConnectNowError", "AdminShutdownError"):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _sqlite_durable_pragmas(dbapi_connection: Any, _: Any) -> None:
    durable_sqlite_connection(dbapi_connection, busy_ms=5000, synchronous="FULL")


class HaloDB:
    """`path` is the SQLite file; `url`, when given, a PostgreSQL URL (postgresql+asyncpg://…)
    that takes its place. `family_id` is written into every row."""

    def __init__(
        self, path: Path, url: str | None = None, *, family_id: str = DEFAULT_FAMILY, idle_seconds: float | None = None
    ) -> None:
        """`idle_seconds` (PostgreSQL): a transaction left idle this long is ended by the server, so
        a paused process's open write (and its lock on the epoch) cannot hold up a take for ever."""
        self.family_id = family_id
        self.fence: Fence | None = None  # set by halo/cluster when several processes may serve the family
        self._sqlite: SqliteEngine | None = None
        self._postgres: AsyncEngine | None = None
        if url is None:
            use_wal(path)
            self._sqlite = SqliteEngine(path, execution_options={FAMILY_OPTION: family_id})
            event.listen(self._sqlite.sync, "connect", _sqlite_durable_pragmas)
        else:
            self._postgres = _postgres_engine(url, family_id, idle_seconds)
            # a shared database; SQLite's file is one family's, rows stamped on write
            bind_family(self._postgres.sync_engine, family_id)
            event.listen(self._postgres.sync_engine, "checkout", self._say_epoch)
            # each statement its own transaction: no BEGIN and COMMIT round trips around one INSERT
            self._autocommit = self._postgres.execution_options(isolation_level="AUTOCOMMIT")
        self.backend = self.sync_engine.dialect.name  # "sqlite" | "postgresql"
        self._created: set[int] = set()
        self._schema: frozenset[str] | None = None  # PostgreSQL: the tables the migrations made
        self._schema_lock = asyncio.Lock()
        self._write_turns = asyncio.Lock()
        self._watchers: list[Callable[[str], None]] = []  # `watch`: told of each statement `send` sends

    @property
    def engine(self) -> AsyncEngine:
        """PostgreSQL's engine (SQLAlchemy's asyncio one): for what only it does (the cluster's own
        session, `send`, the migrations)."""
        assert self._postgres is not None, "HaloDB.engine: PostgreSQL only"
        return self._postgres

    @property
    def sync_engine(self) -> Engine:
        """SQLAlchemy's sync `Engine` underneath either backend: its URL, dialect and events."""
        return self._sqlite.sync if self._sqlite is not None else self.engine.sync_engine

    def _begin(self) -> AbstractAsyncContextManager[Conn]:
        return self._sqlite.begin() if self._sqlite is not None else self.engine.begin()

    def _connect(self, *, autocommit: bool = False) -> AbstractAsyncContextManager[Conn]:
        if self._sqlite is not None:
            return self._sqlite.connect(autocommit=autocommit)
        return (self._autocommit if autocommit else self.engine).connect()

    async def ping(self) -> None:
        """One round trip (`SELECT 1`): raises when the database cannot be reached."""
        async with self._connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def prepare(self) -> None:
        """PostgreSQL: migrate to the newest schema now (at start), so a wrong URL or a refused
        login stops halo before it takes a message. SQLite: nothing to do ahead of first use."""
        if self.backend == "postgresql":
            async with self._schema_lock:
                await self._migrated()

    async def _migrated(self) -> frozenset[str]:
        if self._schema is None:
            from halo.storage.migrate import upgrade  # Alembic loads only where it is used

            try:
                self._schema = await upgrade(self.engine)
            except (OSError, TimeoutError, DBAPIError) as exc:
                raise StorageUnavailable(f"storage.url: {refused(self.engine.url, exc)}") from exc
        return self._schema

    async def _ensure(self, metadata: MetaData) -> None:
        if id(metadata) in self._created:
            return
        async with self._schema_lock:
            if id(metadata) in self._created:
                return
            carry_family(metadata)
            if self.backend == "postgresql":
                missing = sorted(set(metadata.tables) - await self._migrated())
                if missing:
                    raise SchemaError(
                        f"PostgreSQL has no table {', '.join(missing)}: add an Alembic revision "
                        "for it in halo/storage/migrations/versions"
                    )
            else:
                assert self._sqlite is not None
                async with self._sqlite.begin() as conn:
                    await conn.run_sync(_create_sqlite_tables, metadata, self.family_id)
            self._created.add(id(metadata))

    @asynccontextmanager
    async def write(self, metadata: MetaData, *more: MetaData) -> AsyncIterator[Conn]:
        """One transaction, committed on exit (rolled back on an exception). `more`: other
        stores' tables the same transaction writes (a reminder's fired mark and its outbox row)."""
        for tables in (metadata, *more):
            await self._ensure(tables)
        self._refuse_unless_held()
        async with self._write_turns, self._fenced(), self._begin() as conn:
            yield conn

    @asynccontextmanager
    async def atomic(self, metadata: MetaData) -> AsyncIterator[Conn]:
        """One transaction that does not take turns with this process's other writes: for
        statements whose own locks make them safe (PostgreSQL's row locks, ON CONFLICT), and for
        a transaction held open while other writes go on (a claimed outbox row)."""
        await self._ensure(metadata)
        self._refuse_unless_held()
        async with self._fenced(), self._begin() as conn:
            yield conn

    @asynccontextmanager
    async def unfenced(self, metadata: MetaData) -> AsyncIterator[Conn]:
        """A transaction with no epoch check: only for the family lease and the processes' own
        rows (halo/cluster), which are how the epoch is taken in the first place, and for the
        family's config versions, which any process of the family may add."""
        await self._ensure(metadata)
        async with self._begin() as conn:
            yield conn

    def holds_family(self) -> bool:
        """This process may act for the family now: always with one process; with several, while
        it holds the family's lease by its own clock (`Fence.held_now`)."""
        return self.fence is None or self.fence.held_now()

    def _refuse_unless_held(self) -> None:
        """A process that knows it holds nothing writes nothing, and asks nobody."""
        if self.fence is not None and self.fence.epoch is None:
            raise self._refused(None)

    @asynccontextmanager
    async def _fenced(self) -> AsyncIterator[None]:
        """The fence trigger's refusal, as `Fenced`; the cluster is told the epoch it found."""
        try:
            yield
        except DBAPIError as exc:
            if self.fence is None or getattr(exc.orig, "sqlstate", None) != FENCED_SQLSTATE:
                raise
            detail = getattr(getattr(exc.orig, "__cause__", None), "detail", None) or ""
            raise self._refused(int(detail) if detail.isdigit() else None) from None

    def _refused(self, found: int | None) -> Fenced:
        assert self.fence is not None
        for tell in self.fence.on_refused:
            tell(found)
        return Fenced(
            f"this process does not hold family {self.family_id!r} (its epoch {self.fence.epoch}, the family's "
            f"{found}): nothing was written"
        )

    def _say_epoch(self, dbapi_connection: Any, record: Any, _: Any) -> None:
        """At checkout: the connection says the epoch this process holds now (once per change,
        outside any transaction, as the family is said at connect: halo/storage/family.py)."""
        fence = self.fence
        epoch = "" if fence is None else NOT_HELD if fence.epoch is None else str(fence.epoch)
        if record.info.get(EPOCH_SETTING, "") == epoch:
            return
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True
        cursor = dbapi_connection.cursor()
        cursor.execute(f"SELECT set_config('{EPOCH_SETTING}', '{epoch}', false)")
        cursor.close()
        dbapi_connection.autocommit = autocommit
        record.info[EPOCH_SETTING] = epoch

    @asynccontextmanager
    async def read(self, metadata: MetaData) -> AsyncIterator[Conn]:
        await self._ensure(metadata)
        async with self._connect() as conn:
            yield conn

    @asynccontextmanager
    async def autocommit(self, metadata: MetaData) -> AsyncIterator[Conn]:
        """Each statement commits on its own, and none waits for the other writes' turn: for a
        store whose every write is one statement that reads nothing first (a turn's transcript
        lines in one INSERT: one round trip), and for reads that need no snapshot. Fenced as every
        write (the trigger checks the epoch in the same statement)."""
        await self._ensure(metadata)
        self._refuse_unless_held()
        async with self._fenced(), self._connect(autocommit=True) as conn:
            yield conn

    async def send(self, metadata: MetaData, statement: str, *args: Any) -> str:
        """PostgreSQL: one statement in asyncpg's own terms (`$1` parameters), sent on a pooled
        connection's asyncpg connection without SQLAlchemy's execution layer around it. For the
        hottest writes (a turn's transcript lines, twice a turn), where the statement object's
        construction, its cache key, the result's wrapping and the greenlet around each call cost
        more CPU than the round trip. It commits on its own (no transaction is open on a checked-in
        connection), fenced by the trigger as every write; errors come out as through
        `autocommit` (an `IntegrityError`, `Fenced`, a `DBAPIError` that says whether the
        connection was dropped), and a dropped connection is not handed out again.
        Returns the command's status ("INSERT 0 3")."""
        assert self.backend == "postgresql", "send(): PostgreSQL only"
        await self._ensure(metadata)
        self._refuse_unless_held()
        async with self._fenced():
            return str(await self._on_driver(statement, lambda driver: driver.execute(statement, *args)))

    async def fetch(self, metadata: MetaData, statement: str, *args: Any) -> list[Any]:
        """PostgreSQL: a read as `send` writes, its rows as asyncpg returns them. For the biggest
        read (every transcript line of the family when a process takes it), where SQLAlchemy's
        result rows cost twice the fetch."""
        assert self.backend == "postgresql", "fetch(): PostgreSQL only"
        await self._ensure(metadata)
        return list(await self._on_driver(statement, lambda driver: driver.fetch(statement, *args)))

    async def _on_driver(self, statement: str, use: Callable[[Any], Awaitable[Any]]) -> Any:
        """`use(asyncpg connection)` on a pooled connection, errors as SQLAlchemy would raise them."""
        for seen in self._watchers:
            seen(statement)
        pooled = await self.engine.raw_connection()
        driver: Any = pooled.driver_connection  # asyncpg's Connection (not None: just checked out)
        try:
            return await use(driver)
        except Exception as exc:
            found = self._as_sqlalchemy(pooled, exc)
            if found is exc:
                raise
            raise found from exc
        finally:
            # back to the pool (an invalidated one gives its place up), in a greenlet: a pool
            # already full closes it, which awaits. One whose statement was cancelled here is
            # fine: asyncpg has the server cancel it, and the connection's next statement waits
            await greenlet_spawn(pooled.close)

    def watch(self, seen: Callable[[str], None]) -> Callable[[], None]:
        """`seen(statement)` for every statement sent to the database from now on, through
        SQLAlchemy or `send` (tests and bench/ count round trips with it); returns the unwatch."""

        def cursor(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            seen(statement)

        event.listen(self.sync_engine, "before_cursor_execute", cursor)
        self._watchers.append(seen)

        def unwatch() -> None:
            event.remove(self.sync_engine, "before_cursor_execute", cursor)
            self._watchers.remove(seen)

        return unwatch

    def _as_sqlalchemy(self, pooled: Any, exc: Exception) -> Exception:
        """`exc` from asyncpg as SQLAlchemy's execute would have raised it (the DBAPI's error in a
        `DBAPIError`); the connection invalidated if it is closed."""
        dbapi: Any = self.engine.dialect.dbapi
        try:
            pooled.dbapi_connection._handle_exception(exc)  # raises the DBAPI's error (`from exc`), or exc
        except dbapi.Error as translated:
            dropped = self.engine.dialect.is_disconnect(translated, pooled.dbapi_connection, None)
            if dropped:
                pooled.invalidate(translated)
            return DBAPIError.instance(
                None, None, translated, dbapi.Error, connection_invalidated=dropped, dialect=self.engine.dialect
            )
        except Exception:  # not the database's error (a socket's, a bug): as it is
            if pooled.driver_connection.is_closed():
                pooled.invalidate(exc)
        return exc

    async def close(self) -> None:
        await (self._sqlite or self.engine).dispose()


def _postgres_engine(url: str, family_id: str, idle_seconds: float | None) -> AsyncEngine:
    from sqlalchemy.ext.asyncio import create_async_engine  # loads the ORM too: PostgreSQL only

    server_settings = {"application_name": f"halo[{os.getpid()}]"}  # pg_stat_activity names the process
    if idle_seconds is not None:
        server_settings["idle_in_transaction_session_timeout"] = str(max(int(idle_seconds * 1000), 1000))
    # connections kept for the turns in flight at once (each holds one for a statement or two,
    # the outbox and the cluster their own): past the pool, SQLAlchemy opens one per use and
    # closes it after, a new session (a backend started, the family and the epoch said again)
    # for each of those writes
    return create_async_engine(
        url,
        execution_options={FAMILY_OPTION: family_id},
        connect_args={"timeout": CONNECT_TIMEOUT_SECONDS, "server_settings": server_settings},
        pool_size=POOL_SIZE,
        max_overflow=POOL_OVERFLOW,
    )


def _create_sqlite_tables(conn: Connection, metadata: MetaData, family_id: str) -> None:
    """`create_all`, then `family_id` added to a table an older halo made without it, and
    any nullable column a later halo added (the outbox's `choices`), empty in the old rows."""
    metadata.create_all(conn)
    found = inspect(conn)
    quote = conn.dialect.identifier_preparer.quote
    literal = family_id.replace("'", "''")
    for name, table in metadata.tables.items():
        present = {column["name"] for column in found.get_columns(name)}
        if FAMILY_COLUMN not in present:
            conn.execute(
                text(
                    f"ALTER TABLE {quote(name)} ADD COLUMN {FAMILY_COLUMN} "
                    f"VARCHAR({FAMILY_ID_LENGTH}) NOT NULL DEFAULT '{literal}'"
                )
            )
        for column in table.columns:
            if column.name not in present and column.name != FAMILY_COLUMN and column.nullable:
                kind = column.type.compile(dialect=conn.dialect)
                conn.execute(text(f"ALTER TABLE {quote(name)} ADD COLUMN {quote(column.name)} {kind}"))
