"""Cutting memory into chunks: markdown by headings and lines, transcripts by turn pairs.

Chunk text passes `memory.redact` (an index is one more copy a model reads: no secrets in it).
A chunk's hash is the hash of its text alone, so the same words embedded once are found
again by hash wherever they reappear (an edited file's untouched sections, a rebuild).
Changing anything here that changes chunk boundaries must bump CHUNKING_VERSION: the
index then rebuilds its chunks rather than mixing two cuts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time

from memory.redact import redact
from transcripts import TranscriptLine
from transcripts.lines import FROM_HALO, Message
from transcripts.text import clean_text

CHUNKING_VERSION = "md-400-80/tx-pair-1/redacted/daily-own-2"
CHUNK_TOKENS = 400
OVERLAP_TOKENS = 80
CHARS_PER_TOKEN = 4  # the same estimate the context budget uses
TRANSCRIPT_SOURCE = "transcript"

_HEADING = re.compile(r"^#{1,6}\s")
_DAILY = re.compile(r"(?:^|/)(\d{4}-\d{2}-\d{2})\.md$")
_BLANK_RUN = re.compile(r"\n\s*\n(?:\s*\n)+")
_SECTION = re.compile(r"^##\s+(.+?)\s*$")
_COMMENT_LINE = re.compile(r"^\s*<!--.*-->\s*$")
# a line distillation copied from the transcript into a day's notes: "- [09:15] Mom: …"
_COPIED_NOTE = re.compile(r"^\s*-\s\[\d{2}:\d{2}\]\s[^:]{1,80}:\s")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a scope's memory as the index stores it. Lines are 1-based and inclusive."""

    source: str  # "MEMORY.md", "daily/2026-10-03.md" or "transcript"
    start_line: int
    end_line: int
    text: str
    ts: float | None = None  # when it happened (epoch seconds): dated chunks decay, None never does
    keywords: str = ""  # searchable words that are not in the text: the date, spelled out
    hash: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", clean_text(self.text))  # SQLite cannot store a lone surrogate
        object.__setattr__(self, "hash", text_hash(self.text))


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def date_words(when: date) -> str:
    """'2026-10-03 Saturday October 3 2026': so 'October 3' and '2026-10-03' both match."""
    return f"{when.isoformat()} {when:%A %B} {when.day} {when.year}"


def daily_date(source: str) -> date | None:
    match = _DAILY.search(source)
    if not match:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        return None


def chunk_markdown(
    source: str, text: str, max_tokens: int = CHUNK_TOKENS, overlap_tokens: int = OVERLAP_TOKENS
) -> list[Chunk]:
    """Lines gathered up to ~max_tokens; a heading starts a new chunk once the current one has
    some substance; consecutive chunks share ~overlap_tokens of lines so a fact cut in two is
    still whole in one of them. A daily note's chunks carry its date (for decay and search)."""
    day = daily_date(source)
    ts = datetime.combine(day, time(12), tzinfo=UTC).timestamp() if day else None
    keywords = date_words(day) if day else ""
    max_chars, overlap_chars = max_tokens * CHARS_PER_TOKEN, overlap_tokens * CHARS_PER_TOKEN
    lines = [_wrap(line, max_chars) for line in text.splitlines()]
    if day is not None:
        lines = own_lines(lines)
        if not any(line.strip() and not _HEADING.match(line) for line in lines):
            return []  # nothing of its own: the day's turns are indexed from the transcript
    chunks: list[Chunk] = []
    current: list[tuple[int, str]] = []  # (line number, text)
    size = 0

    def flush() -> None:
        body = redact(_BLANK_RUN.sub("\n\n", "\n".join(t for _, t in current)).strip())
        if body:
            chunks.append(Chunk(source, current[0][0], current[-1][0], body, ts, keywords))

    for number, line in enumerate(lines, start=1):
        heading = bool(_HEADING.match(line))
        if current and (size + len(line) + 1 > max_chars or (heading and size > max_chars // 4)):
            flush()
            # carry the tail of the last chunk over, unless a heading starts a new section
            carried: list[tuple[int, str]] = []
            if not heading:
                kept = 0
                for item in reversed(current):
                    if kept + len(item[1]) + 1 > overlap_chars:
                        break
                    carried.insert(0, item)
                    kept += len(item[1]) + 1
            current, size = carried, sum(len(t) + 1 for _, t in carried)
        current.append((number, line))
        size += len(line) + 1
    flush()
    return chunks


def own_lines(lines: list[str]) -> list[str]:
    """A daily file's lines with what the transcript already holds blanked (line numbers stay):
    the `## Transcript` log and the notes distillation copied from turns. Each turn is then
    indexed once, from the transcript; what a person or a model wrote into the day stays."""
    kept: list[str] = []
    in_log = False
    for line in lines:
        section = _SECTION.match(line)
        if section is not None:
            in_log = section.group(1).casefold() == "transcript"
        copied = in_log or _COPIED_NOTE.match(line) is not None or _COMMENT_LINE.match(line) is not None
        kept.append("" if copied and section is None else line)
    return kept


def _wrap(line: str, max_chars: int) -> str:
    """One enormous line (a pasted blob) is cut, not allowed to make a giant chunk."""
    return line if len(line) <= max_chars else line[: max_chars - 1] + "…"


@dataclass(frozen=True, slots=True)
class NumberedLine:
    number: int  # 1-based line number in the transcript file
    line: TranscriptLine


def is_command_turn(line: TranscriptLine) -> bool:
    return isinstance(line, Message) and line.text.lstrip().startswith("/")


def chunk_transcript(lines: Iterable[NumberedLine], max_tokens: int = CHUNK_TOKENS) -> Iterator[Chunk]:
    """One chunk per user message and the reply that followed it. Commands and their replies
    are skipped (a /recall answer quotes other chunks: indexing it would copy them), and so
    are events. The caller decides what to do with a trailing user line still awaiting its reply."""
    pending: list[NumberedLine] = []
    skip_reply = False
    for item in lines:
        line = item.line
        if isinstance(line, Message):
            if pending:
                yield _pair(pending, max_tokens)
            pending = [] if is_command_turn(line) else [item]
            skip_reply = is_command_turn(line)
        elif isinstance(line, FROM_HALO):
            if skip_reply:
                skip_reply = False
                continue
            pending.append(item)
            yield _pair(pending, max_tokens)
            pending = []
    if pending:
        yield _pair(pending, max_tokens)


def _pair(items: list[NumberedLine], max_tokens: int) -> Chunk:
    first = items[0].line
    when = first.ts.astimezone()
    body = redact("\n".join(f"{_who(i.line)}: {i.line.text.strip()}" for i in items))
    text = f"[{when:%Y-%m-%d %H:%M}] {body}"
    max_chars = max_tokens * CHARS_PER_TOKEN
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return Chunk(
        TRANSCRIPT_SOURCE, items[0].number, items[-1].number, text, first.ts.timestamp(), date_words(when.date())
    )


def _who(line: TranscriptLine) -> str:
    if isinstance(line, FROM_HALO):
        return "halo"
    return line.speaker or line.role
