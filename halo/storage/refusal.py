"""Why PostgreSQL did not let halo in, in words that say what to do next.

A newcomer's first PostgreSQL start usually meets a database that does not exist yet:
PostgreSQL says so, and halo adds the one command that creates it, made from `storage.url`
(without its password), so it can be pasted as it is.
"""

from __future__ import annotations

import shlex

from sqlalchemy import URL, make_url

MISSING_DATABASE = "3D000"  # SQLSTATE invalid_catalog_name: `database "…" does not exist`
DEFAULT_PORT = 5432


def shown(url: str | URL) -> str:
    """The URL as it may be printed: without its password, with the scheme people write."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=True)


def refused(url: str | URL, exc: BaseException) -> str:
    """`PostgreSQL at … did not let halo in: <PostgreSQL's reason>`, and for a database that
    does not exist, how to create it."""
    reason = getattr(exc, "orig", None) or exc
    said = f"PostgreSQL at {shown(url)} did not let halo in: {reason}"
    if _sqlstate(exc) == MISSING_DATABASE:
        said += f"\nCreate the database once, then start halo again: {createdb_command(url)}"
    return said


def createdb_command(url: str | URL) -> str:
    """The `createdb` line (PostgreSQL's client tools) that makes the database `url` names."""
    parsed = make_url(url)
    words = ["createdb", "-h", parsed.host or "127.0.0.1"]
    if parsed.port and parsed.port != DEFAULT_PORT:
        words += ["-p", str(parsed.port)]
    if parsed.username:
        words += ["-U", parsed.username]
    words.append(parsed.database or "halo")
    return shlex.join(words)


def _sqlstate(exc: BaseException | None) -> str | None:
    """The SQLSTATE of the error or of what it wraps (SQLAlchemy → its adapter → asyncpg)."""
    seen = 0
    while exc is not None and seen < 5:
        state = getattr(exc, "sqlstate", None)
        if isinstance(state, str):
            return state
        exc = getattr(exc, "orig", None) or exc.__cause__
        seen += 1
    return None
