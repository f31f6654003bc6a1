"""A sqlite3 that can load sqlite-vec, and a plain account of what works when it cannot.

The Python on many machines (this one, pyenv and macOS builds) is compiled without
`enable_load_extension`, so the index uses `sqlean.py`: the stdlib sqlite3 module
rebuilt with extension loading and a current SQLite, with wheels for Linux, macOS and
Windows. If that or sqlite-vec is missing, the index falls back to the stdlib module
with full-text search only, and `SqliteSupport.problem` says what is wrong and how to fix it.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sqlite3 as stdlib_sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

FIX = "run `uv sync` (sqlean-py and sqlite-vec are halo dependencies)"


@dataclass(frozen=True, slots=True)
class SqliteSupport:
    """What this process's SQLite can do for the index."""

    driver: str  # "sqlean" or "sqlite3"
    sqlite_version: str
    vec_version: str | None  # None: no vectors, full-text only
    fts5: bool
    problem: str | None = None  # a sentence for the log and /status when something is missing

    @property
    def vectors(self) -> bool:
        return self.vec_version is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "driver": self.driver,
            "sqlite_version": self.sqlite_version,
            "sqlite_vec": self.vec_version,
            "fts5": self.fts5,
            "problem": self.problem,
        }


def _driver() -> tuple[ModuleType, str | None]:
    try:
        import sqlean  # type: ignore[import-untyped]
    except ImportError as exc:
        return stdlib_sqlite3, f"sqlean.py is not installed ({exc}); {FIX}"
    return sqlean, None


def _vec_extension() -> str:
    """The path of sqlite-vec's loadable extension, found as `sqlite_vec.loadable_path()` finds
    it (`vec0` beside the package's `__init__`) but without importing the package: its
    `__init__` imports `numpy.typing` for a helper halo does not use, and NumPy holds ~11 MiB
    in a process that has no embedder (bench/serve_startup.py)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:
        raise ImportError("No module named 'sqlite_vec'")
    return str(Path(spec.origin).parent / "vec0")


def _load_vec(conn: Any) -> str:
    """Load sqlite-vec into `conn`; returns its version or raises with the reason."""
    extension = _vec_extension()
    if not hasattr(conn, "enable_load_extension"):
        raise RuntimeError("this Python's sqlite3 cannot load extensions (no enable_load_extension)")
    conn.enable_load_extension(True)
    try:
        conn.load_extension(extension)
    finally:
        conn.enable_load_extension(False)
    return str(conn.execute("select vec_version()").fetchone()[0])


@functools.cache
def probe() -> SqliteSupport:
    """Checked once per process: which driver, whether sqlite-vec loads, whether FTS5 exists."""
    module, problem = _driver()
    conn = module.connect(":memory:")
    try:
        vec_version: str | None = None
        try:
            vec_version = _load_vec(conn)
        except Exception as exc:
            problem = problem or f"sqlite-vec could not be loaded: {exc}; {FIX}"
        try:
            conn.execute("create virtual table t using fts5(x)")
            fts5 = True
        except Exception:
            fts5 = False
            problem = (problem + "; " if problem else "") + "this SQLite has no FTS5"
        version = str(module.sqlite_version)
    finally:
        conn.close()
    driver = "sqlean" if module is not stdlib_sqlite3 else "sqlite3"
    if problem:
        problem += " — semantic recall works on full-text search only" if fts5 else " — semantic recall is off"
    return SqliteSupport(driver, version, vec_version, fts5, problem)


def connect(path: Path) -> tuple[Any, SqliteSupport]:
    """Open an index database; vectors are available only if `support.vectors`."""
    support = probe()
    module, _ = _driver()
    conn = module.connect(str(path), check_same_thread=False, isolation_level=None)
    if support.vectors:
        _load_vec(conn)
    conn.execute("pragma journal_mode=wal")
    conn.execute("pragma synchronous=normal")
    conn.execute("pragma foreign_keys=on")
    conn.execute("pragma mmap_size=268435456")
    return conn, support
