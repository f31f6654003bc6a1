"""The connection settings every SQLite store of halo's shares (halo.db, distillation state),
and the one way halo copies a database that may be in use (backups, `halo storage migrate`).

WAL is a property of the database file and persists, so it is set once when the store opens
the file (`use_wal`), before anything else can hold it. Switching a file to WAL needs an
exclusive lock, and SQLite's busy handler does not wait for it: a connection that asks while
another one writes gets "database is locked" at once. So each new connection only asks when
the file is not WAL yet, and carries on if it cannot switch (whoever holds the file does).
"""

from __future__ import annotations

import sqlite3
from contextlib import suppress
from pathlib import Path
from typing import Any


def use_wal(path: Path) -> None:
    """Put the database file in WAL mode now, creating it if needed (at start, before any pool)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30)
    try:
        _wal(conn.cursor())
    finally:
        conn.close()


def durable_sqlite_connection(dbapi_connection: Any, *, busy_ms: int, synchronous: str) -> None:
    """Per-connection settings: wait for a busy file, WAL, and how hard commits sync."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        _wal(cursor)
        cursor.execute(f"PRAGMA synchronous = {synchronous}")
    finally:
        cursor.close()


def _wal(cursor: Any) -> None:
    cursor.execute("PRAGMA journal_mode")
    (mode,) = cursor.fetchone()
    if str(mode).lower() == "wal":
        return
    with suppress(sqlite3.OperationalError):  # someone is writing; the next connection switches it
        cursor.execute("PRAGMA journal_mode = WAL")


def backup_copy(source: Path, target: Path) -> None:
    """A consistent copy of a database that may be in use (its WAL included), through SQLite's
    backup API; `source` is opened read-only."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
