"""Is `storage.url`'s PostgreSQL fit for halo: reachable, and its schema at this halo's head?
`halo doctor` says the answer, and what to do, in words; the password never appears."""

from __future__ import annotations

from sqlalchemy import Connection, inspect, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from halo.storage.migrate import current_revision, head_revision, head_tables, known_revisions

TIMEOUT_SECONDS = 5

Health = tuple[bool, str, str, bool]  # ok, what was found, the fix, only a warning


def _found(connection: Connection) -> tuple[str | None, frozenset[str]]:
    return current_revision(connection), frozenset(inspect(connection).get_table_names())


async def schema_health(url: str) -> Health:
    where = make_url(url).set(drivername="postgresql").render_as_string(hide_password=True)
    engine = create_async_engine(url, connect_args={"timeout": TIMEOUT_SECONDS})
    try:
        async with engine.connect() as conn:
            revision, tables = await conn.run_sync(_found)
    except (OSError, TimeoutError, DBAPIError) as exc:
        reason = getattr(exc, "orig", None) or exc
        return (
            False,
            f"{where} is unreachable or refused halo: {reason or type(reason).__name__}",
            "check storage.url (host, port, database, user, password) and that PostgreSQL is running",
            False,
        )
    finally:
        await engine.dispose()
    head = head_revision()
    if revision is None:
        if tables:
            shown = ", ".join(sorted(tables)[:5]) + (" …" if len(tables) > 5 else "")
            return (
                False,
                f"{where} holds tables that are not halo's ({shown}) and no halo schema",
                "point storage.url at a database of halo's own",
                False,
            )
        return (
            True,
            f"{where} is reachable and empty: halo has not made its tables there yet",
            "halo makes them when it starts; to bring this HALO_HOME's family along first, "
            f"run `uv run halo storage migrate --to {where}`",
            True,
        )
    if revision != head:
        if revision in known_revisions():
            return (
                True,
                f"{where}: the schema is at revision {revision}, this halo's is {head}",
                "halo upgrades it when it starts (halo serve)",
                True,
            )
        return (
            False,
            f"{where}: the schema is at revision {revision}, which this halo does not know (a newer halo made it)",
            "run the newer halo, or upgrade this one",
            False,
        )
    missing = sorted(head_tables() - tables)
    if missing:
        return (
            False,
            f"{where}: the schema says revision {head} but lacks the table(s) {', '.join(missing)}",
            "restore the database from a backup, or copy the family into a new database with "
            "`uv run halo storage migrate --from` then `--to`",
            False,
        )
    return True, f"{where} is reachable, schema at revision {head} (the newest), {len(tables)} tables", "", False
