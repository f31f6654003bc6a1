"""Model extraction: signal turns since the watermark → typed entries in MEMORY.md's `## Learned`.

The seed's pipeline, with its gaps closed: turns are filtered to signal (memory.signals),
chunked with overlap so "as I said earlier" has its context, and sent to the cheap model
for structured output (the Agents SDK with a pydantic `output_type`). A chunk that fails
is retried at higher temperatures; if it still fails, its transcript range is kept in the
job state for a later run and is never counted as done. New entries are deduplicated
against what MEMORY.md and the sidecar already hold, rendered as one line each, and their
metadata kept in MEMORY.meta.json.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from agents import Agent, Model, ModelSettings, RunConfig, Runner
from pydantic import BaseModel, Field

from memory import facts
from memory.distill import MayWrite, Names
from memory.extraction import sidecar
from memory.extraction.dedup import Embedder, Known, unique, word_set
from memory.extraction.signals import signal_kind
from memory.redact import only_redacted, redact
from memory.scope_files import ScopeFiles
from memory.state import JobStates
from memory.store import memory_meta
from memory.when import absolute_dates, day_of, local
from transcripts import TranscriptLine, TranscriptStore
from transcripts.lines import FROM_HALO, Message, Notice, Reply

log = logging.getLogger(__name__)

TEMPERATURES = (0.0, 0.3, 0.7)
CONTEXT_CHARS = 300
MIN_CONFIDENCE = 0.3
EVIDENCE_MATCH = 0.8

INSTRUCTIONS = """\
You read part of a family's chat with their assistant and pick out what is worth remembering
for a long time: preferences, facts, decisions, corrections and procedures.

Each entry:
- content: one short, self-contained sentence that names the person (never "I", "me" or
  "the user"). Use absolute dates (the chat shows them), never "today" or "tomorrow".
- type: preference | fact | decision | correction | procedure
- confidence: 0.0 to 1.0, how sure you are that this is true and lasting
- evidence: a short quote, copied word for word from the chat, that shows it
- about: the name of the person it is about, or null

Lines marked (context) are there only to help you understand; take nothing from them alone.
Never include passwords, keys, card, bank or account numbers. Small talk, greetings and
things that only matter today are not worth remembering: return an empty list for them.
"""

EntryType = Literal["preference", "fact", "decision", "correction", "procedure"]


class ExtractedEntry(BaseModel):
    type: EntryType
    content: str = Field(description="one self-contained sentence naming the person")
    confidence: float = Field(description="0.0 to 1.0")
    evidence: str = Field(description="a verbatim quote from the chat")
    about: str | None = Field(description="whom it is about, or null")


class Extraction(BaseModel):
    entries: list[ExtractedEntry]


class ChunkExtractor(Protocol):
    """Extracts entries from one chunk of chat text at a given temperature; raises on failure."""

    async def __call__(self, text: str, temperature: float) -> Extraction: ...


class ModelChunkExtractor:
    """A ChunkExtractor on an Agents SDK model (the cheap tier), with structured output."""

    def __init__(self, model: Model, *, max_tokens: int = 2048, tracing: bool = False) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.tracing = tracing

    async def __call__(self, text: str, temperature: float) -> Extraction:
        agent = Agent(
            name="memory-extractor",
            instructions=INSTRUCTIONS,
            model=self.model,
            output_type=Extraction,
            model_settings=ModelSettings(temperature=temperature, max_tokens=self.max_tokens),
        )
        result = await Runner.run(agent, text, max_turns=1, run_config=RunConfig(tracing_disabled=not self.tracing))
        return result.final_output_as(Extraction, raise_if_incorrect_type=True)


class ChunkFailed(RuntimeError):
    """Every attempt at one chunk failed."""


@dataclass(frozen=True, slots=True)
class Chunk:
    start: int  # byte range of the transcript this chunk is responsible for
    end: int
    text: str
    day: str  # ISO date of its last turn, for absolute dates


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    scope_id: str
    chunks: int
    failed_chunks: int
    added: int
    duplicates: int
    pending_ranges: list[list[int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def build_chunks(
    lines: Sequence[tuple[int, TranscriptLine]],
    range_start: int,
    range_end: int,
    *,
    names: Names,
    keep: Callable[[TranscriptLine], bool],
    size: int,
    overlap: int,
) -> list[Chunk]:
    """Signal turns of one transcript range, `size` to a chunk, each chunk repeating the last
    `overlap` turns of the one before as context. Chunk ranges tile [range_start, range_end)."""
    turns: list[tuple[int, list[str], str]] = []  # (offset, rendered lines, day)
    previous: TranscriptLine | None = None
    for offset, line in lines:
        if isinstance(line, Message) and keep(line) and signal_kind(line.text):
            rendered: list[str] = []
            if isinstance(previous, FROM_HALO):
                rendered.append(_render(previous, names, context=True))
            rendered.append(_render(line, names))
            turns.append((offset, rendered, day_of(line.ts).isoformat()))
        if isinstance(line, Message | Reply | Notice):
            previous = line
    chunks: list[Chunk] = []
    for i in range(0, len(turns), size):
        own = turns[i : i + size]
        earlier = turns[max(0, i - overlap) : i]
        text_lines = [f"{r} (context)" if not r.endswith("(context)") else r for t in earlier for r in t[1]]
        text_lines += [r for t in own for r in t[1]]
        start = range_start if i == 0 else own[0][0]
        end = turns[i + size][0] if i + size < len(turns) else range_end
        chunks.append(Chunk(start, end, "\n".join(text_lines), own[-1][2]))
    return chunks


def _render(line: TranscriptLine, names: Names, context: bool = False) -> str:
    text = " ".join(redact(line.text).split())
    if context:
        text = text[:CONTEXT_CHARS]
    mark = " (context)" if context else ""
    return f"[{local(line.ts):%Y-%m-%d %H:%M}] {names(line.speaker)}: {text}{mark}"


def merge_ranges(ranges: list[list[int]]) -> list[list[int]]:
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


class ModelExtraction:
    """One scope's extraction job. The model is called without holding the scope's file lock;
    files and state are written under it."""

    def __init__(
        self,
        files: ScopeFiles,
        transcripts: TranscriptStore,
        state: JobStates,
        extractor: ChunkExtractor,
        *,
        names: Names,
        may_write: MayWrite,
        model_name: str | None = None,
        chunk_turns: int = 12,
        overlap_turns: int = 2,
        temperatures: Sequence[float] = TEMPERATURES,
        embedder: Embedder | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.files = files
        self.transcripts = transcripts
        self.state = state
        self.extractor = extractor
        self.names = names
        self.may_write = may_write
        self.model_name = model_name
        self.chunk_turns = chunk_turns
        self.overlap_turns = overlap_turns
        self.temperatures = tuple(temperatures)
        self.embedder = embedder
        self.clock = clock

    async def run(self, scope_id: str) -> ExtractionResult:
        await self.files.store.ready(scope_id)  # PostgreSQL: the scope's rows held here
        state = await asyncio.to_thread(self.state.get, scope_id, "extract")
        chunks, new_end = await asyncio.to_thread(self._chunks, scope_id, state.pending, state.offset)
        found: list[tuple[Chunk, ExtractedEntry]] = []
        failed: list[list[int]] = []
        errors: list[str] = []
        for chunk in chunks:
            try:
                extraction = await self._extract(chunk)
            except ChunkFailed as exc:
                log.warning("memory extraction: a chunk of %s failed, kept for later: %s", scope_id, exc)
                failed.append([chunk.start, chunk.end])
                errors.append(str(exc))
                continue
            found.extend((chunk, e) for e in extraction.entries if self._credible(e, chunk))
        added, duplicates = await self._store(scope_id, found)
        pending = merge_ranges(failed)
        await asyncio.to_thread(self._commit, scope_id, new_end, pending, errors)
        return ExtractionResult(scope_id, len(chunks), len(failed), added, duplicates, pending, errors)

    def _chunks(self, scope_id: str, pending: list[list[int]], offset: int) -> tuple[list[Chunk], int]:
        """Chunks of the ranges a failed run left, then of everything after the watermark."""
        chunks: list[Chunk] = []
        for start, end in pending:
            reader = self.transcripts.read_from(scope_id, start)
            lines = []
            for at, line in reader:
                if at >= end:
                    break
                lines.append((at, line))
            reader.close()
            chunks += self._build(scope_id, lines, start, end)
        reader = self.transcripts.read_from(scope_id, offset)
        lines = list(reader)
        chunks += self._build(scope_id, lines, offset, reader.next_offset)
        return chunks, reader.next_offset

    def _build(self, scope_id: str, lines: list[tuple[int, TranscriptLine]], start: int, end: int) -> list[Chunk]:
        return build_chunks(
            lines,
            start,
            end,
            names=self.names,
            keep=lambda line: line.for_memory and self.may_write(line.speaker, scope_id),
            size=self.chunk_turns,
            overlap=self.overlap_turns,
        )

    async def _extract(self, chunk: Chunk) -> Extraction:
        problems: list[str] = []
        for temperature in self.temperatures:
            try:
                return await self.extractor(chunk.text, temperature)
            except Exception as exc:  # a bad answer or a failed call: try again, warmer
                problems.append(f"t={temperature}: {type(exc).__name__}: {redact(str(exc))[:200]}")
        raise ChunkFailed("; ".join(problems))

    @staticmethod
    def _credible(entry: ExtractedEntry, chunk: Chunk) -> bool:
        """Drop low-confidence entries and those whose evidence is not in the chunk (made up)."""
        if entry.confidence < MIN_CONFIDENCE or not entry.content.strip():
            return False
        quoted, source = word_set(entry.evidence), word_set(chunk.text)
        return bool(quoted) and len(quoted & source) / len(quoted) >= EVIDENCE_MATCH

    async def _store(self, scope_id: str, found: list[tuple[Chunk, ExtractedEntry]]) -> tuple[int, int]:
        if not found:
            return 0, 0
        now = datetime.fromtimestamp(self.clock(), UTC)
        candidates: list[sidecar.Entry] = []
        for chunk, e in found:
            content = " ".join(absolute_dates(redact(e.content), datetime.fromisoformat(chunk.day).date()).split())
            if only_redacted(content):
                continue
            candidates.append(
                sidecar.Entry(
                    id=uuid.uuid4().hex,
                    type=e.type,
                    content=content,
                    confidence=round(min(max(e.confidence, 0), 1), 2),
                    evidence=redact(e.evidence)[:300],
                    about=e.about,
                    source=[chunk.start, chunk.end],
                    extracted_at=now.isoformat(timespec="seconds"),
                    model=self.model_name,
                )
            )
        existing = await asyncio.to_thread(sidecar.load, self.files.store, memory_meta(scope_id))
        text = await asyncio.to_thread(self.files.memory_text, scope_id)
        known = [Known(e.content, e.evidence) for e in existing] + [Known(f.body) for f in facts.parse(text)]
        keep = await unique([Known(c.content, c.evidence) for c in candidates], known, self.embedder)
        fresh = [candidates[i] for i in keep]
        added = await asyncio.to_thread(self._write, scope_id, fresh, now)
        return added, len(candidates) - added

    def _write(self, scope_id: str, fresh: list[sidecar.Entry], now: datetime) -> int:
        header = self.files.memory_header(scope_id)
        meta_path = memory_meta(scope_id)
        written: list[sidecar.Entry] = []
        with self.files.lock(scope_id):
            self.files.ensure(scope_id)

            def change(text: str) -> str:
                written.clear()
                for entry in fresh:
                    meta = f"{entry.type}, {entry.confidence:.2f}, {entry.extracted_at[:10]}"
                    text, result = facts.add_fact(text, entry.content, meta, section=facts.LEARNED, header=header)
                    if result.added:
                        written.append(entry)
                return text

            _, after = self.files.update_memory(scope_id, change)
            entries = sidecar.load(self.files.store, meta_path)
            sidecar.mark_removed(entries, {f.body for f in facts.live(after)}, now.isoformat(timespec="seconds"))
            sidecar.save(self.files.store, meta_path, [*entries, *written])
        return len(written)

    def _commit(self, scope_id: str, end: int, pending: list[list[int]], errors: list[str]) -> None:
        with self.files.lock(scope_id):
            state = self.state.get(scope_id, "extract")
            now = self.clock()
            done = state.succeeded(now, max(state.offset, end), 0, pending)
            if errors:  # the run moved on, but chunks wait for a later run: back off before retrying
                error = f"{len(errors)} chunk(s) failed and were kept for a later run: {errors[0]}"
                done = done.partly_failed(now, error[:500], state.failures)
            self.state.put(done)
