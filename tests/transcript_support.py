"""A transcript as a halo holds it, on either store: files when embedded, the lines held in memory
on PostgreSQL (no file there). Tests read through the halo's own store, never a file path."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from config.loader import load_settings
from halo.runtime.app import halo_db
from halo.storage.transcript_rows import TranscriptRows
from transcripts import TranscriptLine, TranscriptStore
from transcripts.recorded import RecordedTranscripts


def transcript_text(halo: Any, scope_id: str) -> str:
    """The transcript as a JSONL file would hold it, its lines as written ("" without one)."""
    held = reversed(list(halo.transcripts.raw_reversed(scope_id)))
    return "".join(raw.decode("utf-8") + "\n" for _, raw in held)


def raw_lines(halo: Any, scope_id: str) -> list[dict[str, Any]]:
    """Each line of the scope's transcript as JSON, oldest first."""
    return [json.loads(raw) for raw in transcript_text(halo, scope_id).splitlines()]


@asynccontextmanager
async def transcript_store(home: Path) -> AsyncIterator[TranscriptStore]:
    """The transcripts as halo keeps them for `home`, read by a store of its own (after a `halo serve`
    process stopped, say): the files, or on PostgreSQL (`storage.url`) the rows."""
    settings = load_settings(home)
    db = halo_db(settings) if settings.storage.url is not None else None
    store = (
        RecordedTranscripts(TranscriptRows(db), settings.paths.transcripts)
        if db is not None
        else TranscriptStore(settings.paths.transcripts)
    )
    try:
        yield store
    finally:
        store.close()
        if db is not None:
            await db.close()


async def recorded_tail(home: Path, scope_id: str) -> list[TranscriptLine]:
    """The scope's last lines as the store of record holds them (a fresh store: no process's cache)."""
    async with transcript_store(home) as store:
        await store.ready(scope_id)
        return store.tail(scope_id, 20)


async def every_line(home: Path) -> list[dict[str, Any]]:
    """Every line of every conversation `home`'s halo kept, as JSON, scope by scope."""
    async with transcript_store(home) as store:
        if isinstance(store, RecordedTranscripts):
            assert isinstance(store.records, TranscriptRows)
            scope_ids = await store.records.scope_ids()
        else:
            scope_ids = store.scope_ids()
        found: list[dict[str, Any]] = []
        for scope_id in scope_ids:
            await store.ready(scope_id)
            found += [json.loads(raw) for _, raw in reversed(list(store.raw_reversed(scope_id)))]
        return found
