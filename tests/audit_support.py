"""A halo's audit events, on either store: `logs/events.jsonl` when embedded, the rows of
`audit_events` on PostgreSQL (no file there). Tests read through the halo's own `AuditLog`,
or for a home whose process stopped, through one of their own; never a file path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config.loader import load_settings
from halo.runtime.app import halo_db
from halo.storage.audit_rows import AuditRows
from transcripts.audit import AuditLog

ALL = 100_000  # more than a test writes


async def audit_events(halo: Any, kind: str | None = None) -> list[dict[str, Any]]:
    """Every event `halo` (a running one) and the processes of its family wrote, oldest first."""
    return await halo.audit.tail(ALL, kind=kind)


async def home_audit_events(home: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Every event `home`'s halo wrote (a `halo serve` process, running or stopped), oldest first."""
    settings = load_settings(home)
    if settings.storage.url is None:
        return await AuditLog(settings.paths.events_log).tail(ALL, kind=kind)
    db = halo_db(settings)
    try:
        return await AuditLog(record=AuditRows(db)).tail(ALL, kind=kind)
    finally:
        await db.close()
