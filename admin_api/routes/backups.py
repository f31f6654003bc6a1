"""Backups of the whole workspace: make one now, list those kept (loopback only)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from aiohttp import web

from admin_api.base import household_desk
from admin_api.guards import actor
from admin_api.models import ApiModel, Timestamp, reply
from admin_api.routes import Reply, Route
from halo.workspace.backups import backup_now, list_archives


class Backup(ApiModel):
    file: str
    bytes: int
    createdAt: Timestamp


class BackupMade(ApiModel):
    file: str
    files: int
    bytes: int


async def make_backup(request: web.Request) -> web.Response:
    """An archive of the workspace into HALO_HOME/backups now (the oldest beyond backups.keep go)."""
    halo = household_desk(request)
    paths = halo.paths
    url = halo.settings.storage.url
    info = await asyncio.to_thread(
        backup_now,
        paths.home,
        paths.backups,
        halo.settings.backups.keep,
        storage_url=url.get_secret_value() if url is not None else None,
    )
    halo.audit.write("backup_made", file=info.path.name, files=info.files, actor=actor(request))
    return reply(BackupMade(file=info.path.name, files=info.files, bytes=info.bytes), status=201)


async def backups(request: web.Request) -> web.Response:
    folder = household_desk(request).paths.backups

    def listing() -> list[Backup]:
        found = []
        for path in list_archives(folder):
            st = path.stat()
            made = datetime.fromtimestamp(st.st_mtime, UTC).isoformat()
            found.append(Backup(file=path.name, bytes=st.st_size, createdAt=made))
        return found

    return reply(await asyncio.to_thread(listing))


ROUTES = [
    Route(
        "POST",
        "/backups",
        make_backup,
        "loopback",
        summary="Archive the whole workspace into HALO_HOME/backups now",
        description="The same archive as `halo export`; the oldest beyond `backups.keep` are deleted.",
        responses={201: Reply("the archive made", BackupMade)},
        tag="backups",
    ),
    Route(
        "GET",
        "/backups",
        backups,
        "loopback",
        summary="The workspace archives kept in HALO_HOME/backups",
        responses={200: Reply("oldest first", list[Backup])},
        tag="backups",
    ),
]
