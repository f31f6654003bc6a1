"""MEMORY.meta.json: what MEMORY.md's one-line rendering of a learned entry leaves out.

Type, confidence, the evidence quote, where in the transcript it came from, when and by
which model. An entry is linked to its MEMORY.md line by the line's text. When a parent
deletes or rewrites the line (or someone says "forget …"), the entry is kept here marked
`removed`, so the same thing is not learned again on the next run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from memory.store import MemoryStore

VERSION = 1


@dataclass(slots=True)
class Entry:
    id: str
    type: str
    content: str  # also the text of its MEMORY.md line
    confidence: float
    evidence: str
    about: str | None
    source: list[int]  # [start, end) byte range of the transcript it was extracted from
    extracted_at: str
    model: str | None = None
    removed_at: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def load(store: MemoryStore, relative: str) -> list[Entry]:
    raw = store.text(relative) or ""
    if not raw.strip():
        return []
    data = json.loads(raw)
    fields = set(Entry.__dataclass_fields__)
    return [Entry(**{k: v for k, v in item.items() if k in fields}) for item in data.get("entries", [])]


def save(store: MemoryStore, relative: str, entries: list[Entry]) -> None:
    body = {"version": VERSION, "entries": [asdict(e) for e in entries]}
    store.write(relative, json.dumps(body, ensure_ascii=False, indent=1) + "\n")


def mark_removed(entries: list[Entry], live_bodies: set[str], now: str) -> int:
    """Entries whose line is gone from MEMORY.md are marked removed; returns how many were newly marked."""
    marked = 0
    for entry in entries:
        if entry.removed_at is None and entry.content not in live_bodies:
            entry.removed_at = now
            marked += 1
    return marked
