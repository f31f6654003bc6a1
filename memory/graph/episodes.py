"""What a quiet scope sends to its graph: new durable facts and signal turns, one episode a day.

Pure functions over the transcript and MEMORY.md, so what goes in is easy to read and test.
An episode is a few dated lines in the shape Graphiti reads best ("[time] Speaker: text");
turns are filtered to signal (memory.signals) and to speakers who may write memory here,
and redacted: secrets never reach the graph.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time

from memory import facts
from memory.extraction.signals import signal_kind
from memory.redact import only_redacted, redact
from memory.when import local
from transcripts import TranscriptLine
from transcripts.lines import Message

TURN_CHARS = 600
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_FACT_KINDS = {"preference", "fact", "decision", "correction", "procedure"}


@dataclass
class Episode:
    day: date
    when: datetime  # the reference time Graphiti dates the episode's facts by
    lines: list[str] = field(default_factory=list)
    end_offset: int | None = None  # the transcript watermark once this episode is in
    fact_keys: list[str] = field(default_factory=list)  # MEMORY.md facts it carries

    @property
    def body(self) -> str:
        return "\n".join(self.lines)


def fact_key(body: str) -> str:
    return hashlib.sha256(body.casefold().encode()).hexdigest()[:16]


def fact_items(memory_text: str, sent: set[str]) -> list[tuple[date, str, str]]:
    """(day, line, key) for each live MEMORY.md fact not yet sent to the graph."""
    items = []
    for fact in facts.live(memory_text):
        key = fact_key(fact.body)
        if key in sent:
            continue
        found = _DATE.search(fact.meta)
        day = date.fromisoformat(found.group(0)) if found else None
        if day is None:
            continue
        who = fact.meta.split(",")[0].strip().removeprefix("shared by ").strip()
        who = "" if who in _FACT_KINDS or not who else who
        body = redact(fact.body)
        if only_redacted(body):
            continue
        label = f"{who} (noted)" if who else "Noted"
        items.append((day, f"[{day.isoformat()}] {label}: {body}", key))
    return items


def build_episodes(
    turns: Iterable[tuple[int, TranscriptLine]],
    end_offset: int,
    fact_lines: list[tuple[date, str, str]],
    *,
    names: Callable[[str | None], str],
    keep: Callable[[TranscriptLine], bool],
) -> list[Episode]:
    """Signal turns (from the watermark on) and new facts, grouped by local day, oldest first.
    Each day's episode moves the watermark to the first line of the next day's turns (the last
    one to `end_offset`), so a failed day is retried whole and nothing is skipped."""
    by_day: dict[date, Episode] = {}
    order: list[tuple[int, date]] = []
    for offset, line in turns:
        day = local(line.ts).date()
        order.append((offset, day))
        if not isinstance(line, Message) or not keep(line) or not signal_kind(line.text):
            continue
        text = " ".join(redact(line.text).split())[:TURN_CHARS]
        if not text or only_redacted(text):
            continue
        episode = by_day.setdefault(day, Episode(day, line.ts))
        episode.when = max(episode.when, line.ts)
        episode.lines.append(f"[{local(line.ts):%Y-%m-%d %H:%M}] {names(line.speaker)}: {text}")
    for day, text, key in fact_lines:
        episode = by_day.setdefault(day, Episode(day, datetime.combine(day, time(12), tzinfo=UTC)))
        episode.lines.append(text)
        episode.fact_keys.append(key)
    # watermark per day: the offset of the first transcript line of a later day
    days = sorted(by_day)
    for index, day in enumerate(days):
        later = [offset for offset, d in order if d > day]
        by_day[day].end_offset = min(later) if later and index < len(days) - 1 else end_offset
    return [by_day[d] for d in days]
