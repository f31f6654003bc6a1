"""`halo storage migrate --to URL | --from URL`: move a family between HALO_HOME and
PostgreSQL, and the per-part table that says it arrived whole. The work is halo.storage.move's."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `halo --help` must not load SQLAlchemy and Alembic
    from config.settings import Settings
    from halo.storage.move import Moved, Progress


class StorageCommandError(Exception):
    """A reason the command did nothing, said plainly (the CLI prints it, exit 2)."""


def add_storage_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`halo storage …`, registered on the `halo` command's subparsers."""
    storage = sub.add_parser("storage", help="where halo keeps its data: move a family to or from PostgreSQL")
    storage_sub = storage.add_subparsers(dest="storage_command", required=True)
    migrate = storage_sub.add_parser(
        "migrate",
        help="copy HALO_HOME's data into PostgreSQL (--to) or back (--from), verified; stop halo first",
    )
    way = migrate.add_mutually_exclusive_group(required=True)
    way.add_argument("--to", metavar="URL", help="postgresql://user:password@host:port/database to copy into")
    way.add_argument("--from", dest="source", metavar="URL", help="postgresql://… to copy from into HALO_HOME")
    migrate.add_argument("--force", action="store_true", help="replace data the target already holds")
    migrate.set_defaults(fn=cmd_storage_migrate)


def cmd_storage_migrate(args: argparse.Namespace) -> int:
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its INFO lines are not the user's business
    from config.loader import load_settings
    from config.paths import default_home
    from config.settings import postgresql_url
    from halo.runtime.doctor import serving_this_home
    from halo.storage.move import MoveError, from_postgres, shown, to_postgres

    home = default_home()
    try:
        url = postgresql_url((args.to or args.source).strip())
    except ValueError as exc:
        raise StorageCommandError(str(exc).replace("storage.url", "the URL")) from None
    progress = _progress() if sys.stderr.isatty() else None
    settings = load_settings(home) if (home / "halo.yaml").is_file() else None
    if settings is not None and asyncio.run(serving_this_home(settings)):
        raise StorageCommandError(
            f"halo is running on {home} (it answers on port {settings.admin.port}): stop it first, "
            "so nothing changes while the family is copied"
        )
    try:
        if args.to:
            if settings is None:
                raise StorageCommandError(f"{home} is not a halo workspace (no halo.yaml): set HALO_HOME")
            family_id = settings.family_id
            print(f"halo: copying {home} into PostgreSQL at {shown(url)}", file=sys.stderr)
            moved = asyncio.run(to_postgres(home, url, family_id=family_id, force=args.force, progress=progress))
        else:
            print(f"halo: copying PostgreSQL at {shown(url)} into {home}", file=sys.stderr)
            family = settings.family_id if settings is not None else None  # None: the whole database
            moved = asyncio.run(from_postgres(home, url, family_id=family, force=args.force, progress=progress))
    except MoveError as exc:
        for line in report(getattr(exc, "moved", [])):
            print(line)
        raise StorageCommandError(str(exc)) from None
    for line in report(moved):
        print(line)
    where = f"PostgreSQL at {shown(url)}" if args.to else str(home)
    print(f"copied and verified: {sum(m.target_records for m in moved)} records in {len(moved)} parts into {where}")
    print(next_steps(settings, url, into_postgres=bool(args.to)))
    return 0


def next_steps(settings: Settings | None, url: str, *, into_postgres: bool) -> str:
    """What to do after a move, in the order to do it: point halo.yaml at where the family now
    is (unless it already does), check, start."""
    from halo.storage.move import shown

    configured = settings.storage.url.get_secret_value() if settings and settings.storage.url else None
    if into_postgres:
        if configured == url:
            first = "halo.yaml already points there (storage.url)"
        else:
            written = shown(url).replace(":***@", ":<password>@")
            first = f"set `storage: {{url: {written}}}` in halo.yaml (or HALO_STORAGE__URL)"
    elif settings is None:
        first = "copy the family's halo.yaml into HALO_HOME, without storage.url"
    elif configured is not None:
        first = "remove storage.url from halo.yaml (and HALO_STORAGE__URL, if set)"
    else:
        first = "halo.yaml already keeps the family in HALO_HOME (no storage.url)"
    return f"Next: {first}, then `uv run halo doctor` to check and `uv run halo serve` to start."


def storage_url_of(home: Path) -> str | None:
    """`storage.url` of the workspace at `home` (halo.yaml, or the environment); None when
    there is no halo.yaml or it sets none: the family is all in HALO_HOME."""
    from config.loader import load_settings

    if not (home / "halo.yaml").is_file():
        return None
    url = load_settings(home).storage.url
    return url.get_secret_value() if url is not None else None


def report(moved: Sequence[Moved]) -> list[str]:
    """One line a part that holds records (or differs): records on each side and whether the
    checksums agree; the parts empty on both sides in one line after."""
    shown = [m for m in moved if m.source_records or m.target_records or not m.ok]
    empty = [m.part for m in moved if m not in shown]
    if not shown and not empty:
        return []
    width = max([len("part"), *(len(m.part) for m in shown)])  # a new family: every part empty
    lines = [f"{'part':<{width}}  {'source':>8}  {'copied':>8}  checksum"]
    for m in shown:
        lines.append(
            f"{m.part:<{width}}  {m.source_records:>8}  {m.target_records:>8}  "
            f"{'match' if m.ok else 'DIFFERS'} {m.target_checksum[:12]}"
        )
    if empty:
        lines.append(f"empty on both sides: {', '.join(empty)}")
    return lines


LONG_COPY = 5000  # records: a part this big shows its progress on a terminal


def _progress() -> Progress:
    def show(part: str, done: int, total: int) -> None:
        if total < LONG_COPY:
            return
        end = "\n" if done >= total else ""
        print(f"\rhalo: {part}: {done}/{total}", end=end, file=sys.stderr, flush=True)

    return show
