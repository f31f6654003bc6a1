"""Hybrid search: BM25 and cosine candidates, one weighted score, recency decay, MMR.

Fusion is a weighted sum, not reciprocal rank fusion, because halo needs a minimum score
that means the same thing for every query: the context builder adds recalled chunks on
every turn, and on "thanks!" it should add nothing. RRF scores are ranks, so the best
candidate of any query scores the same whether it is relevant or not. Here

    score = w · max(0, cosine) + (1 − w) · bm25 / best bm25 of this query

The cosine is absolute (a property of the text pair, not of the query's other results);
the BM25 part is relative, but only chunks that share a word with the query get it. With
no vectors (embedder `none` or unavailable) the score is the BM25 part alone.

The minimum score is a relevance gate. Recency is not a multiplier on everything: a family's
old but unique memory ("when did we first go to the support group?") must not lose to a
recent near-miss. A question that asks for the recent ("lately", "this week", "latest")
orders what passed by relevance times decay (dated notes and transcript turns, half-life in
days; MEMORY.md never decays); any other question by relevance, the newer first only on a tie.
A chunk whose date the question names ("what happened on March 14") does not decay.
MMR finally picks results that are relevant and unlike the ones already picked.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memory.semantic.chunking import TRANSCRIPT_SOURCE, daily_date
from memory.semantic.index import ChunkRow, ScopeIndex

if TYPE_CHECKING:  # NumPy is imported where vectors are compared: with no embedder, never
    import numpy as np

# Filler words, and words of time: a question's "last month" is for recency decay to weigh, not
# for BM25 to match against "the last week of the semester".
STOPWORDS = frozenset(
    """
a about above after again all am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only
or other our ours ourselves out over own same say said she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves tell told remember know anything something
thing things please halo hey hi hello thanks thank ok okay yes yeah maybe really also still ever much many
lot get gets got getting go goes going went one ones need needs want wants like make makes made let us
last next ago day days week weeks month months year years today yesterday tomorrow time
recent recently lately latest newest currently nowadays
""".split()  # noqa: SIM905 (a word list reads better as text)
)

_WORD = re.compile(r"\w+", re.UNICODE)
_DATE_WORDS = frozenset(
    {
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    }
)


# "lately", "this week", "the latest": the question asks for the recent, so recency may weigh
_RECENT = re.compile(
    r"\b(?:recent(?:ly)?|lately|latest|newest|currently|nowadays|these days|right now|"
    r"(?:this|last|past) (?:few )?(?:days?|week|weekend|month)|today|yesterday|tonight|so far)\b",
    re.I,
)
TIE_BREAK = 1e-3  # without a recency intent: the newer of two equally relevant chunks first


def asks_for_recent(text: str) -> bool:
    return _RECENT.search(text) is not None


@dataclass(frozen=True, slots=True)
class SearchParams:
    limit: int = 5
    candidates: int = 40
    min_score: float = 0.3
    vector_weight: float = 0.6
    half_life_days: float = 90.0
    mmr_lambda: float = 0.7
    window_turns: int = 2
    day_weight: float = 0.2  # a day that talked most about the question lifts its turns by this much
    max_mirrored: int = 300_000
    now: float | None = None  # epoch seconds; tests pin it


@dataclass(frozen=True, slots=True)
class Hit:
    """A recalled chunk, with where it came from."""

    scope_id: str
    source: str  # "MEMORY.md", "daily/2026-10-03.md", "transcript"
    start_line: int
    end_line: int
    text: str
    score: float  # what results are ordered by: relevance, decayed when the question asks for the recent
    relevance: float  # before decay; what the minimum score is compared with
    text_score: float
    vector_score: float | None
    ts: float | None = None
    chunk_id: int = 0
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def location(self) -> str:
        lines = (
            f"line {self.start_line}"
            if self.start_line == self.end_line
            else f"lines {self.start_line}–{self.end_line}"
        )
        return f"{self.source} {lines}"


def query_terms(text: str) -> list[str]:
    """Content words of a query, lower-cased, in order, without duplicates."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if len(word) > 1 and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def fts_query(text: str) -> str:
    """An FTS5 query that matches any content word: each quoted, so no word is an operator."""
    return " OR ".join(f'"{t}"' for t in query_terms(text))


COMMON_SHARE = 0.5  # a word in more than this share of the chunks has no BM25 weight (its idf is 0)
MIN_RARE_TERMS = 3  # ... and is left out of the search when at least this many other words remain


def searched_words(index: ScopeIndex, query: str) -> str:
    """The FTS5 query for one index: a word in most of its chunks (a speaker's name in a
    group's transcript) adds nothing to BM25 but makes FTS5 score half the index, so it is
    left out when the question has enough other words. With fewer, the common words stay:
    they are most of what the question says ("what do Jon and Gina have in common?")."""
    terms = query_terms(query)
    if len(terms) <= MIN_RARE_TERMS:
        return fts_query(query)
    common = index.common_terms(terms, COMMON_SHARE)
    rare = [t for t in terms if t not in common]
    return " OR ".join(f'"{t}"' for t in rare) if len(rare) >= MIN_RARE_TERMS else fts_query(query)


def names_a_day(text: str) -> bool:
    """Does the question name a month, a weekday or a date ("March 14", "2026-03-14")?"""
    return any(w in _DATE_WORDS or (w.isdigit() and len(w) == 4) for w in query_terms(text)) or bool(
        re.search(r"\d{4}-\d{2}-\d{2}", text)
    )


def decay(ts: float | None, source: str, now: float, half_life_days: float) -> float:
    """1 for undated memory (MEMORY.md); halves every `half_life_days` for dated notes and turns."""
    if ts is None or not (source == TRANSCRIPT_SOURCE or daily_date(source)):
        return 1.0
    age_days = max(0.0, (now - ts) / 86400.0)
    return math.pow(0.5, age_days / half_life_days)


def scope_candidates(
    index: ScopeIndex,
    query: str,
    query_vector: np.ndarray | None,
    params: SearchParams,
    *,
    text_only: bool = False,
    vector_only: bool = False,
) -> list[Hit]:
    """Every chunk of one scope that passes the relevance gate, scored and decayed."""
    now = params.now if params.now is not None else time.time()
    match = searched_words(index, query)
    wanted = max(params.candidates, 4 * params.limit)
    text = [] if vector_only else index.text_candidates(match, wanted)
    use_vectors = query_vector is not None and not text_only
    vector_hits = (
        index.vector_candidates(query_vector, wanted, params.max_mirrored)
        if use_vectors and query_vector is not None
        else []
    )
    rows = index.chunks_by_id(i for i, _ in text)
    by_embedding = index.chunks_by_embedding(e for e, _ in vector_hits)
    rows.update(by_embedding)
    if not rows:
        return []
    vectors = index.vectors_of(r.embedding_id for r in rows.values() if r.embedding_id is not None)
    best_text = max((s for _, s in text), default=0.0)
    text_scores = {i: (s / best_text if best_text > 0 else 0.0) for i, s in text}
    weight = params.vector_weight if use_vectors and query_vector is not None and vectors else 0.0
    asked_for_day = index.date_matches(query_terms(query), text_scores) if text_scores and names_a_day(query) else set()
    recent = asks_for_recent(query)
    scored: list[tuple[ChunkRow, float, float, float | None, np.ndarray | None]] = []
    for row in rows.values():
        vector = vectors.get(row.embedding_id) if row.embedding_id is not None else None
        cosine = float(vector @ query_vector) if vector is not None and query_vector is not None else None
        t = text_scores.get(row.id, 0.0)
        if vector_only:
            relevance = max(0.0, cosine or 0.0)
        elif weight:
            relevance = weight * max(0.0, cosine or 0.0) + (1.0 - weight) * t
        else:
            relevance = t
        scored.append((row, relevance, t, cosine, vector))
    shares = day_shares([(row.ts, relevance) for row, relevance, *_ in scored if row.source == TRANSCRIPT_SOURCE])
    hits: list[Hit] = []
    for row, relevance, t, cosine, vector in scored:
        day = _day(row.ts) if row.source == TRANSCRIPT_SOURCE else None
        ranked = relevance + params.day_weight * (shares.get(day, 0.0) if day is not None else 0.0)
        if max(relevance, ranked / (1.0 + params.day_weight)) < params.min_score:
            continue  # a weak match passes on the strength of its day
        age = 1.0 if row.id in asked_for_day else decay(row.ts, row.source, now, params.half_life_days)
        score = ranked * age if recent else ranked + TIE_BREAK * age
        hits.append(_hit(index.scope_id, row, score, relevance, t, cosine, vector))
    return hits


def _day(ts: float | None) -> int | None:
    return None if ts is None else int(ts // 86400)


def day_shares(dated: Sequence[tuple[float | None, float]]) -> dict[int, float]:
    """How much of the conversation that matched a query was said on each day (UTC), the best
    day being 1. A day's turns are a session: a turn from the day that talked most about the
    question is more likely the one asked about (or the other half of its answer) than an
    equally worded turn from a day that touched it once. Only turns count: notes and files
    stand on their own words."""
    days: dict[int, float] = {}
    for ts, relevance in dated:
        day = _day(ts)
        if day is not None and relevance > 0:
            days[day] = days.get(day, 0.0) + relevance
    best = max(days.values(), default=0.0)
    return {day: total / best for day, total in days.items()} if best > 0 else {}


def _hit(
    scope_id: str,
    row: ChunkRow,
    score: float,
    relevance: float,
    text_score: float,
    cosine: float | None,
    vector: np.ndarray | None,
) -> Hit:
    return Hit(
        scope_id,
        row.source,
        row.start_line,
        row.end_line,
        row.text,
        score,
        relevance,
        text_score,
        cosine,
        row.ts,
        row.id,
        vector,
    )


def mmr(hits: Sequence[Hit], limit: int, lam: float, pool_factor: int = 4) -> list[Hit]:
    """Maximal marginal relevance over the best `limit * pool_factor` hits: each pick maximises
    λ·score − (1−λ)·(max similarity to the picks so far). Similarity is the cosine of the
    chunks' vectors, or word overlap (Jaccard) when either has none.

    The pool is a few dozen hits, so the loop is plain Python; NumPy is used only for the
    cosines, when vectors exist (and so NumPy is loaded already)."""
    pool = sorted(hits, key=lambda h: h.score, reverse=True)[: max(limit, limit * pool_factor)]
    if lam >= 1.0 or len(pool) <= 1:
        return pool[:limit]
    sims = _similarities(pool)
    penalty = [0.0] * len(pool)
    chosen: list[int] = []
    free = list(range(len(pool)))
    while free and len(chosen) < limit:
        pick = max(free, key=lambda i: lam * pool[i].score - (1.0 - lam) * penalty[i])  # the first on a tie
        chosen.append(pick)
        free.remove(pick)
        penalty = [max(p, s) for p, s in zip(penalty, sims[pick], strict=True)]
    return [pool[i] for i in chosen]


def _similarities(pool: Sequence[Hit]) -> list[list[float]]:
    """Each pair's cosine when both have vectors, else the Jaccard overlap of their words."""
    n = len(pool)
    with_vectors = [i for i, h in enumerate(pool) if h.vector is not None]
    sims = _word_overlap([h.text for h in pool]) if len(with_vectors) < n else [[0.0] * n for _ in range(n)]
    if with_vectors:
        import numpy as np

        matrix = np.stack([pool[i].vector for i in with_vectors])  # type: ignore[misc]
        cosines = (matrix @ matrix.T).tolist()
        for a, i in enumerate(with_vectors):
            for b, j in enumerate(with_vectors):
                sims[i][j] = float(cosines[a][b])
    return sims


def _word_overlap(texts: Sequence[str]) -> list[list[float]]:
    """Jaccard similarity of every pair's word sets."""
    words = [set(_WORD.findall(text.lower())) for text in texts]
    out = [[0.0] * len(texts) for _ in texts]
    for i, a in enumerate(words):
        for j in range(i, len(words)):
            shared = len(a & words[j])
            union = len(a) + len(words[j]) - shared
            out[i][j] = out[j][i] = shared / union if union else 0.0
    return out


def search(
    indexes: Sequence[ScopeIndex],
    query: str,
    query_vector: np.ndarray | None,
    params: SearchParams,
    *,
    text_only: bool = False,
    vector_only: bool = False,
) -> list[Hit]:
    """Search several scopes and merge them by score, then diversify."""
    found: list[Hit] = []
    for index in indexes:
        found.extend(scope_candidates(index, query, query_vector, params, text_only=text_only, vector_only=vector_only))
    if params.window_turns <= 0:
        return mmr(found, params.limit, params.mmr_lambda)
    picked = mmr(found, 2 * params.limit, params.mmr_lambda, pool_factor=2)
    return widen({i.scope_id: i for i in indexes}, picked, params.window_turns, params.limit)


def widen(indexes: dict[str, ScopeIndex], hits: Sequence[Hit], turns: int, limit: int) -> list[Hit]:
    """A recalled turn comes with the `turns` said just before and after it: a question is
    often answered in the next turn, and a turn often makes sense only with the one it answers.
    A hit inside an earlier hit's window is not repeated: it stretches that window by its own
    neighbours instead (a run of matching turns is one passage, and the turn after it is shown)."""
    around: dict[str, dict[tuple[int, int], tuple[list[ChunkRow], list[ChunkRow]]]] = {}
    for scope_id, index in indexes.items():
        spans = [(h.start_line, h.end_line) for h in hits if h.scope_id == scope_id and h.source == TRANSCRIPT_SOURCE]
        around[scope_id] = index.neighbours(TRANSCRIPT_SOURCE, spans, turns) if spans else {}
    owner: dict[tuple[str, int], int] = {}  # a shown turn → the output window holding it
    windows: list[tuple[Hit, dict[int, tuple[int, str]]]] = []  # each hit, its turns: start → (end, text)
    for hit in hits:
        if hit.source != TRANSCRIPT_SOURCE:
            if len(windows) < limit:
                windows.append((hit, {}))
            continue
        key = (hit.scope_id, hit.start_line)
        before, after = around[hit.scope_id][hit.start_line, hit.end_line]
        at = owner.get(key)
        if at is None:
            if len(windows) >= limit:
                continue
            at = len(windows)
            windows.append((hit, {hit.start_line: (hit.end_line, hit.text)}))
            owner[key] = at
        rows = windows[at][1]
        for r in (*before, *after):
            if (hit.scope_id, r.start_line) not in owner:
                owner[hit.scope_id, r.start_line] = at
                rows[r.start_line] = (r.end_line, r.text)
    out: list[Hit] = []
    for hit, rows in windows:
        if not rows:
            out.append(hit)
            continue
        lines = sorted(rows)
        text = passage([rows[s][1] for s in lines])
        out.append(dataclasses.replace(hit, text=text, start_line=lines[0], end_line=rows[lines[-1]][0]))
    return out


_STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) \d{2}:\d{2}\] ")


def passage(turns: Sequence[str]) -> str:
    """Consecutive turns as one passage: a turn's date stamp is said once, not again on each
    turn of the same day (a window costs fewer tokens, so more of them fit a budget)."""
    out: list[str] = []
    day = None
    for text in turns:
        stamp = _STAMP.match(text)
        if stamp is not None and stamp.group(1) == day:
            text = text[stamp.end() :]
        elif stamp is not None:
            day = stamp.group(1)
        out.append(text)
    return "\n".join(out)
