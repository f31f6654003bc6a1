"""Benchmark: deterministic distillation of a 205-turn session, against just reading it.

The seed reports 102 s for model extraction of a 205-turn session; the deterministic rules
should take well under a second. Each repetition uses a fresh HALO_HOME with the same
session on disk, and times, in the same run:

- baseline: reading and parsing the whole transcript (TranscriptStore.read_from),
- distil: the whole run — read, classify, redact, write MEMORY.md and the day's notes
  atomically (fsync'd), move the watermark in halo.db,
- every-N: one more run after 20 new items, the steady state of `distillation_every_n_items`.

Run: `uv run python bench/distill.py [--turns 205] [--repeat 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config.paths import HaloPaths
from memory.distill import Distiller
from memory.scope_files import ScopeFiles
from memory.state import JobStateStore
from transcripts import TranscriptLine, TranscriptStore
from transcripts.lines import Message, Reply

SCOPE = "telegram:1002"
USER_LINES = [
    "remember my shoe size is {n}",
    "my favourite colour is {colour}",
    "Priya is my manager",
    "note: the plumber comes on Thursday at {hour}:00",
    "Can you help me plan dinner for the weekend? We have {n} guests and one is vegetarian.",
    "The kids have swimming tomorrow, soccer on Saturday and a birthday party on Sunday afternoon.",
    "what's the weather like?",
    "ok thanks",
    "my wifi password is hunter{n}",
    "I really prefer tea over coffee in the evenings, and I hate olives on pizza.",
    "forget my favourite colour",
    "Let's go with the blue tent for the camping trip in {month}.",
]
ASSISTANT_LINES = [
    "Got it. I'll keep that in mind for later, and remind you when it matters.",
    "Here is a plan: pasta on Friday, a roast on Saturday and a vegetable curry on Sunday. Want a shopping list?",
    "Sounds like a busy weekend! I can add those to the family calendar if you like.",
    "Okay.",
]


def session(turns: int, seed: int = 7) -> list[TranscriptLine]:
    rng = random.Random(seed)
    start = datetime(2026, 2, 13, 8, 0, tzinfo=UTC)
    lines = []
    for i in range(turns):
        user = i % 2 == 0
        template = rng.choice(USER_LINES if user else ASSISTANT_LINES)
        text = template.format(
            n=rng.randint(30, 45),
            hour=rng.randint(8, 18),
            colour=rng.choice(["green", "blue"]),
            month=rng.choice(["May", "June"]),
        )
        lines.append(
            (Message if user else Reply)(
                id=uuid.uuid4().hex,
                ts=start + timedelta(minutes=2 * i),
                scope_id=SCOPE,
                text=text,
                speaker="mom" if user else "halo",
            )
        )
    return lines


def names(label: str | None) -> str:
    return {"mom": "Mom", "halo": "halo"}.get(label or "", label or "someone")


async def write_session(home: Path, lines: list[TranscriptLine]) -> TranscriptStore:
    store = TranscriptStore(HaloPaths(home).transcripts)
    for line in lines:
        await store.append(line)
    return store


def median_ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:7.2f} ms   max {max(values) * 1000:7.2f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=205)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    lines = session(args.turns)
    more = session(20, seed=8)

    read_times: list[float] = []
    distil_times: list[float] = []
    step_times: list[float] = []
    result = None
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            paths = HaloPaths(home)
            paths.ensure()
            store = await write_session(home, lines)

            t = time.perf_counter()
            read = list(store.read_from(SCOPE))
            read_times.append(time.perf_counter() - t)
            assert len(read) == args.turns

            state = JobStateStore(paths.halo_db)
            state.all()  # create the table outside the timing, as a running halo has
            distiller = Distiller(ScopeFiles(paths), store, state, names=names, may_write=lambda s, c: True)
            t = time.perf_counter()
            result = distiller.run(SCOPE)
            distil_times.append(time.perf_counter() - t)

            for line in more:
                await store.append(replace(line, id=uuid.uuid4().hex, ts=line.ts + timedelta(hours=8)))
            t = time.perf_counter()
            distiller.run(SCOPE)
            step_times.append(time.perf_counter() - t)
            state.close()

    assert result is not None
    print(f"deterministic distillation of a {args.turns}-turn session, {args.repeat} runs, fresh HALO_HOME each\n")
    print(f"baseline: read + parse the transcript   {median_ms(read_times)}")
    print(f"distil the whole session                {median_ms(distil_times)}")
    print(f"every-N step: 20 more items             {median_ms(step_times)}")
    print(
        f"\nper run: {result.items} items → +{result.facts_added} facts, {result.facts_superseded} superseded, "
        f"{result.facts_forgotten} forgotten, +{result.notes_added} notes"
    )
    worst = max(distil_times)
    verdict = "meets" if worst < 1.0 else "MISSES"
    print(
        f"goal < 1 s for the whole session: {verdict} it (worst {worst * 1000:.1f} ms; "
        f"the seed's model extraction took 102 s)"
    )


if __name__ == "__main__":
    asyncio.run(main())
