"""Keeping one scope's index in step with its markdown files and its transcript.

The markdown files are MEMORY.md, the daily notes and the documents members sent (files/).

Markdown: a file whose size and mtime are unchanged is skipped without reading it; one
whose content hash is unchanged only has its mtime updated; only a changed file is cut
again, and a removed file's chunks are dropped. Transcript: read from the byte offset the
last sync stopped at (the watermark, stored in the same transaction as the chunks), so
each line is indexed once. Then every chunk without a vector is embedded, once per
distinct text, in batches: the embedding cache answers for texts seen before.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass, field

from memory.documents import FILES_DIR
from memory.semantic.chunking import (
    TRANSCRIPT_SOURCE,
    NumberedLine,
    chunk_markdown,
    chunk_transcript,
    is_command_turn,
)
from memory.semantic.embedders import Embedder
from memory.semantic.index import FileState, ScopeIndex
from memory.store import MemoryStore, scope_folder
from transcripts import TranscriptStore
from transcripts.lines import Message

log = logging.getLogger(__name__)

REPLY_WAIT_SECONDS = 600  # a user line younger than this may still get its reply: index it with it
PROGRESS_EVERY = 512


@dataclass(slots=True)
class SyncReport:
    scope_id: str
    files_changed: list[str] = field(default_factory=list)
    files_removed: list[str] = field(default_factory=list)
    transcript_chunks: int = 0
    embedded: int = 0  # texts sent to the embedder
    rebuilt: bool = False
    seconds: float = 0.0


def markdown_files(store: MemoryStore, scope_id: str) -> dict[str, str]:
    """The scope's markdown memory, by its source in the index (its path in the scope's folder):
    MEMORY.md (and any other top-level .md), daily/*.md, and the documents members sent,
    files/*.md (memory.documents). Each maps to its path relative to HALO_HOME."""
    folder = scope_folder(scope_id)
    found: dict[str, str] = {}
    for relative in store.names(folder):
        source = relative.removeprefix(folder)
        top, _, rest = source.rpartition("/")
        if rest.endswith(".md") and top in ("", "daily", FILES_DIR):
            found[source] = relative
    return found


def sync_markdown(index: ScopeIndex, store: MemoryStore, report: SyncReport) -> None:
    known = index.files()
    current = markdown_files(store, index.scope_id)
    for source in sorted(known.keys() - current.keys()):
        index.drop_source(source)
        report.files_removed.append(source)
    for source, relative in sorted(current.items()):
        stamp = store.stamp(relative)
        old = known.get(source)
        if stamp is None:
            continue  # removed while we looked: the next sync drops it
        if old is not None and old.mtime == stamp.mtime and old.size == stamp.size:
            continue
        text = store.text(relative)
        if text is None:
            continue
        state = FileState(hashlib.sha256(text.encode("utf-8")).hexdigest(), stamp.mtime, stamp.size)
        if old is not None and old.hash == state.hash:
            index.touch_file(source, state)
            continue
        index.replace_source(source, chunk_markdown(source, text), state)
        report.files_changed.append(source)


def sync_transcript(
    index: ScopeIndex, transcripts: TranscriptStore, report: SyncReport, now: float | None = None
) -> None:
    offset = int(index.meta("transcript_offset") or 0)
    line_no = int(index.meta("transcript_lines") or 0)
    size = transcripts.size(index.scope_id)
    if size < offset:  # purged and started again: the old chunks describe a transcript that is gone
        log.warning("semantic index %s: transcript shrank below the watermark; re-indexing it", index.scope_id)
        index.drop_source(TRANSCRIPT_SOURCE)
        offset = line_no = 0
        index.add_chunks([], {"transcript_offset": 0, "transcript_lines": 0})
    if size == offset:
        return
    reader = transcripts.read_from(index.scope_id, offset)
    numbered: list[tuple[int, NumberedLine]] = []  # (byte offset, line)
    for line_offset, line in reader:  # line numbers count every line, corrupt ones included
        numbered.append((line_offset, NumberedLine(line_no + reader.lines_passed, line)))
    end = reader.next_offset
    end_lines = line_no + reader.lines_passed
    if not numbered:
        index.add_chunks([], {"transcript_offset": end, "transcript_lines": end_lines})
        return
    now = time.time() if now is None else now
    # a trailing user message may still be waiting for its reply: leave it for the next sync
    last_offset, last = numbered[-1]
    waiting = now - last.line.ts.timestamp() < REPLY_WAIT_SECONDS
    if isinstance(last.line, Message) and not is_command_turn(last.line) and waiting:
        numbered.pop()
        end, end_lines = last_offset, last.number - 1
    chunks = list(chunk_transcript(item for _, item in numbered))
    index.add_chunks(chunks, {"transcript_offset": end, "transcript_lines": end_lines})
    report.transcript_chunks += len(chunks)


async def embed_pending(index: ScopeIndex, embedder: Embedder, report: SyncReport, batch: int = 256) -> None:
    """Vectors for every chunk without one; progress is logged when there are many (a rebuild)."""
    identity = embedder.identity
    if await asyncio.to_thread(index.ensure_vectors, identity):
        report.rebuilt = True
    total = await asyncio.to_thread(index.pending_count)
    done = 0
    while True:
        todo = await asyncio.to_thread(index.pending, batch)
        if not todo:
            break
        vectors = await embedder.embed([text for _, text in todo])
        await asyncio.to_thread(index.store_vectors, identity, [h for h, _ in todo], vectors)
        report.embedded += len(todo)
        done += len(todo)
        if total >= PROGRESS_EVERY:
            log.info(
                "semantic index %s: embedded %d/%d chunks with %s",
                index.scope_id,
                min(done, total),
                total,
                identity.key,
            )
