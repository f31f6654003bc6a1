"""Is a newly extracted entry already known? Token Jaccard always, embedding cosine when available.

The thresholds follow the seed's extraction pipeline: content similarity ≥ 0.5, or the same
evidence (≥ 0.5) with some content overlap (≥ 0.2); with an embedder, cosine ≥ 0.85.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

CONTENT_THRESHOLD = 0.5
EVIDENCE_THRESHOLD = 0.5
EVIDENCE_CONTENT_THRESHOLD = 0.2
COSINE_THRESHOLD = 0.85

_STOP = frozenset(
    {
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "all",
        "any",
        "can",
        "had",
        "her",
        "was",
        "one",
        "our",
        "out",
        "has",
        "have",
        "his",
        "how",
        "its",
        "may",
        "new",
        "now",
        "see",
        "who",
        "did",
        "get",
        "him",
        "she",
        "too",
        "use",
        "that",
        "this",
        "with",
        "from",
        "they",
        "been",
        "were",
        "will",
        "what",
        "when",
        "your",
        "them",
        "then",
        "than",
        "there",
        "their",
        "about",
        "would",
        "which",
        "into",
        "also",
        "just",
        "like",
        "some",
        "very",
        "should",
        "could",
        "does",
        "each",
        "only",
        "over",
        "such",
        "more",
        "most",
        "other",
        "user",
        "prefers",
        "likes",
        "wants",
    }
)


class Embedder(Protocol):
    """Turns texts into vectors (the semantic index's embedder). One vector per text, same order."""

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class Known:
    content: str
    evidence: str = ""


def word_set(text: str) -> frozenset[str]:
    return frozenset(w for w in re.split(r"\W+", text.lower()) if len(w) >= 3 and w not in _STOP)


def jaccard(a: str, b: str) -> float:
    sa, sb = word_set(a), word_set(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


def similar(new: Known, old: Known) -> bool:
    content = jaccard(new.content, old.content)
    if content >= CONTENT_THRESHOLD:
        return True
    if new.evidence and old.evidence:
        return jaccard(new.evidence, old.evidence) >= EVIDENCE_THRESHOLD and content >= EVIDENCE_CONTENT_THRESHOLD
    return False


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


async def unique(new: list[Known], existing: list[Known], embedder: Embedder | None = None) -> list[int]:
    """Indexes of `new` entries that duplicate neither `existing` nor an earlier new entry."""
    kept: list[int] = []
    seen = list(existing)
    vectors: list[list[float]] = []
    if embedder is not None and new:
        try:
            vectors = await embedder.embed([k.content for k in [*existing, *new]])
        except Exception:  # no embeddings today: Jaccard alone still deduplicates
            vectors = []
    offset = len(existing)
    kept_vectors: list[list[float]] = vectors[:offset]
    for i, entry in enumerate(new):
        if any(similar(entry, old) for old in seen):
            continue
        if vectors:
            mine = vectors[offset + i]
            if any(cosine(mine, v) >= COSINE_THRESHOLD for v in kept_vectors):
                continue
            kept_vectors.append(mine)
        kept.append(i)
        seen.append(entry)
    return kept
