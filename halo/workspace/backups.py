"""A family's whole workspace in one archive, and back (`halo export` / `halo import`).

The archive is a tar.gz: `MANIFEST.json` first (format, when, and the sha256 and size of
every file), then the files under `workspace/`. SQLite databases are copied with SQLite's
backup API, so an export taken while halo runs is consistent; append-only files
(transcripts, the audit log) are copied as they are (a torn last line is skipped on read).
Import checks everything before it touches the destination: a missing or foreign
manifest, a path that leaves the workspace, a link or device, a file missing, extra, or
with the wrong checksum — any of these refuses the whole archive. An existing workspace
is replaced only with `force`, and even then it is moved aside, not deleted.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import os
import re
import shutil
import sqlite3
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from halo.workspace.private_files import make_private
from transcripts.sqlite import backup_copy

log = logging.getLogger(__name__)

FORMAT = "halo-workspace/1"
MANIFEST = "MANIFEST.json"
PREFIX = "workspace"
SKIP_TOP = frozenset({"backups", "logins", "graph"})  # archives themselves, one-time links, FalkorDB's own data
SKIP_SUFFIXES = ("-wal", "-shm", "-journal", ".tmp", ".lock")
SQLITE_MAGIC = b"SQLite format 3\x00"
ARCHIVE_NAME = re.compile(r"halo-\d{8}T\d{6}Z\.tar\.gz")

Progress = Callable[[int, int, str], None]  # files done, files in all, the file


class BackupError(Exception):
    """Why an archive cannot be made or restored, said plainly."""


@dataclass(frozen=True, slots=True)
class ArchiveInfo:
    path: Path
    files: int
    bytes: int


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def workspace_files(home: Path) -> Iterator[Path]:
    """Every file of the workspace that belongs in an archive, sorted."""
    for path in sorted(home.rglob("*")):
        rel = path.relative_to(home)
        if rel.parts[0] in SKIP_TOP or path.is_symlink() or not path.is_file():
            continue
        if path.name.endswith(SKIP_SUFFIXES):
            continue
        yield path


def _stored_in_postgres(home: Path, storage_url: str, staging: Path) -> dict[str, Path]:
    """What PostgreSQL keeps of the family, written into `staging` as HALO_HOME would hold it
    (halo.db's tables, …): the files that stand in for HALO_HOME's own in the archive."""
    from config.loader import ConfigError, load_settings
    from halo.storage.move import MoveError, stage_from_postgres

    try:  # the database may hold several families: the archive is this home's family alone
        family_id = load_settings(home).family_id
    except ConfigError as exc:
        raise BackupError(f"cannot tell which family to archive: {exc}") from None
    staging.mkdir(mode=0o700)
    try:
        asyncio.run(stage_from_postgres(home, storage_url, staging, family_id=family_id))
    except MoveError as exc:
        raise BackupError(f"cannot read the family's data from PostgreSQL: {exc}") from None
    return {p.relative_to(staging).as_posix(): p for p in sorted(staging.rglob("*")) if p.is_file()}


def export_workspace(
    home: Path, dest: Path, progress: Progress | None = None, *, storage_url: str | None = None
) -> ArchiveInfo:
    """Write `home` as one archive at `dest` (atomically, 0600). With `storage_url`
    (PostgreSQL keeps the family), the archive holds PostgreSQL's data in HALO_HOME's own
    form instead of the home's local copies, so it restores as an embedded workspace."""
    if not (home / "halo.yaml").is_file():
        raise BackupError(f"{home} is not a halo workspace (no halo.yaml)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix=".halo-export-", dir=dest.parent) as staging_dir:
        staging = Path(staging_dir)
        files = {path.relative_to(home).as_posix(): path for path in workspace_files(home)}
        if storage_url is not None:
            files |= _stored_in_postgres(home, storage_url, staging / "stored")
        copies: list[tuple[str, Path]] = []
        for done, (rel, path) in enumerate(sorted(files.items()), 1):
            source = path
            if _is_sqlite(path):
                source = staging / f"{done}.sqlite"
                backup_copy(path, source)
            else:
                source = staging / f"{done}.copy"
                shutil.copyfile(path, source)  # a stable snapshot: the checksum and the bytes agree
            manifest[rel] = {"sha256": _sha256(source), "size": source.stat().st_size}
            copies.append((rel, source))
            if progress is not None:
                progress(done, len(files), rel)
        head = {"format": FORMAT, "created": datetime.now(UTC).isoformat(), "files": manifest}
        partial = staging / "archive.tar.gz"
        with tarfile.open(partial, "w:gz") as tar:
            data = json.dumps(head, indent=1, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mode, info.mtime = len(data), 0o600, int(datetime.now(UTC).timestamp())
            tar.addfile(info, io.BytesIO(data))
            for rel, source in copies:
                tar.add(source, arcname=f"{PREFIX}/{rel}", recursive=False)
        os.chmod(partial, 0o600)
        os.replace(partial, dest)
    return ArchiveInfo(dest, len(manifest), dest.stat().st_size)


def _safe_name(name: str) -> str | None:
    """The workspace-relative path of an archive member, or None when it would leave the workspace."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name or not path.parts or path.parts[0] != PREFIX:
        return None
    rel = PurePosixPath(*path.parts[1:])
    return rel.as_posix() if rel.parts else None


def _read_manifest(tar: tarfile.TarFile) -> dict[str, dict[str, object]]:
    try:
        member = tar.getmember(MANIFEST)
        raw = tar.extractfile(member)
        head = json.loads(raw.read()) if raw is not None else None
    except (KeyError, ValueError, tarfile.TarError) as exc:
        raise BackupError(f"not a halo archive: no readable {MANIFEST} ({exc})") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT or not isinstance(head.get("files"), dict):
        raise BackupError(f"not a halo archive: {MANIFEST} is not {FORMAT}")
    return head["files"]


def verify_archive(archive: Path, staging: Path) -> list[str]:
    """Extract `archive` into `staging`, checking every member; the workspace paths restored."""
    try:
        tar = tarfile.open(archive, "r:gz")  # noqa: SIM115 (closed by the with below; open errors said apart)
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise BackupError(f"{archive} is not a readable tar.gz archive: {exc}") from None
    with tar:
        try:
            manifest = _read_manifest(tar)
            seen: set[str] = set()
            for member in tar.getmembers():
                if member.name == MANIFEST:
                    continue
                rel = _safe_name(member.name)
                if rel is None:
                    raise BackupError(f"refused: {member.name!r} would be written outside the workspace")
                if not member.isfile():
                    raise BackupError(f"refused: {member.name!r} is not a regular file")
                expected = manifest.get(rel)
                if not isinstance(expected, dict):
                    raise BackupError(f"refused: {rel} is in the archive but not in its manifest")
                target = staging / rel
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    raise BackupError(f"refused: {rel} cannot be read")
                digest = hashlib.sha256()
                with target.open("wb") as out:
                    while block := source.read(1 << 20):
                        digest.update(block)
                        out.write(block)
                if digest.hexdigest() != expected.get("sha256"):
                    raise BackupError(f"refused: {rel} is damaged (its checksum does not match the manifest)")
                seen.add(rel)
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise BackupError(f"{archive} is damaged: {exc}") from None
    missing = sorted(set(manifest) - seen)
    if missing:
        raise BackupError(f"refused: the archive lacks {len(missing)} files its manifest lists, e.g. {missing[0]}")
    if "halo.yaml" not in seen:
        raise BackupError("refused: the archive has no halo.yaml")
    return sorted(seen)


def _has_workspace(home: Path) -> bool:
    return home.exists() and any(home.iterdir())


def import_workspace(archive: Path, home: Path, *, force: bool = False) -> list[str]:
    """Restore `archive` as `home`. Stop halo first. Without `force`, an existing workspace is
    never touched; with it, the old one is moved aside to `<home>.before-import-<time>`."""
    if _has_workspace(home) and not force:
        raise BackupError(f"{home} already holds a workspace: nothing was changed (use --force to replace it)")
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{home.name}.import-", dir=home.parent))
    try:
        restored = verify_archive(archive, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if home.exists():
        if _has_workspace(home):
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            os.replace(home, home.with_name(f"{home.name}.before-import-{stamp}"))
        else:
            home.rmdir()
    os.replace(staging, home)
    make_private(home)
    return restored


def archive_name(now: datetime) -> str:
    return f"halo-{now.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}.tar.gz"


def list_archives(folder: Path) -> list[Path]:
    """The scheduled and on-demand archives in `folder`, oldest first."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if ARCHIVE_NAME.fullmatch(p.name))


def prune(folder: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` archives; the ones deleted."""
    archives = list_archives(folder)
    doomed = archives[: max(len(archives) - keep, 0)]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def backup_now(
    home: Path, folder: Path, keep: int, now: datetime | None = None, *, storage_url: str | None = None
) -> ArchiveInfo:
    """One archive into `folder` (HALO_HOME/backups), then keep only the newest `keep`."""
    info = export_workspace(home, folder / archive_name(now or datetime.now(UTC)), storage_url=storage_url)
    prune(folder, keep)
    return info


SCHEDULE = re.compile(r"daily (?P<hour>[01]\d|2[0-3]):(?P<minute>[0-5]\d)")


def schedule_trigger(schedule: str, timezone: str) -> CronTrigger:
    """`"daily 03:30"` in the family's timezone, as an APScheduler trigger."""
    match = SCHEDULE.fullmatch(schedule.strip())
    if match is None:
        raise BackupError(f'backups.schedule must look like "daily 03:30", not {schedule!r}')
    return CronTrigger(hour=int(match["hour"]), minute=int(match["minute"]), timezone=ZoneInfo(timezone))


class BackupSchedule:
    """Archives into HALO_HOME/backups on `backups.schedule`, keeping the newest `backups.keep`."""

    def __init__(
        self, home: Path, folder: Path, schedule: str, keep: int, timezone: str, *, storage_url: str | None = None
    ) -> None:
        self.home = home
        self.storage_url = storage_url  # PostgreSQL keeps the family: each archive holds its data
        self.folder = folder
        self.keep = keep
        self.trigger = schedule_trigger(schedule, timezone)
        self.runs = 0
        self.last_error: str | None = None
        self._scheduler: AsyncIOScheduler | None = None

    async def run(self) -> ArchiveInfo | None:
        """One scheduled backup; a failure is logged and kept for /backups, never raised."""
        try:
            info = await asyncio.to_thread(backup_now, self.home, self.folder, self.keep, storage_url=self.storage_url)
        except (BackupError, OSError, sqlite3.Error) as exc:
            self.last_error = str(exc)
            log.warning("scheduled backup failed: %s", exc)
            return None
        self.runs += 1
        self.last_error = None
        return info

    def start(self) -> None:
        self._scheduler = AsyncIOScheduler()
        self._scheduler.add_job(  # a run the loop came to late is made late, not skipped (the default: 1 s)
            self.run, self.trigger, id="backup", max_instances=1, coalesce=True, misfire_grace_time=3600
        )
        self._scheduler.start()

    def next_run(self, now: datetime) -> datetime | None:
        return self.trigger.get_next_fire_time(None, now)

    def close(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
