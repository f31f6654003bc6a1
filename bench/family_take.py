"""Benchmark: what taking a family costs on PostgreSQL (#31), once its transcripts are held in memory.

A process that takes the family (a start, a failover) reads every scope's transcript from
`transcript_lines` before it answers. Seeds `--scopes` × `--lines` lines of about 400 bytes in a
fresh database, then, in the same run:

- baseline: asyncpg alone fetching the same rows, scope by scope (the floor: the bytes must come);
- `RecordedTranscripts.take` of every scope, as the family's take does it;
- the take again with nothing new (a process that held the family before: one query a scope);
- the memory the held lines take (tracemalloc), against their bytes.

Run: `uv run python bench/family_take.py [--scopes 20] [--lines 5000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import tracemalloc
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from halo.storage import HaloDB  # noqa: E402
from halo.storage.transcript_rows import TranscriptRows  # noqa: E402
from tests.storage_support import fresh_database  # noqa: E402
from transcripts.lines import Message  # noqa: E402
from transcripts.recorded import RecordedTranscripts  # noqa: E402
from transcripts.records import RecordedLine  # noqa: E402

FAMILY = "bench"


async def seed(rows: TranscriptRows, scopes: list[str], lines: int) -> None:
    for scope_id in scopes:
        said = [
            Message(uuid.uuid4().hex, datetime.now(UTC), scope_id, f"{n} " + "a" * 250, speaker="mom").to_json()
            for n in range(lines)
        ]
        await rows.append(scope_id, [RecordedLine(n, datetime.now(UTC), text) for n, text in enumerate(said)])


async def fetch_alone(url: str, scopes: list[str]) -> float:
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        started = time.perf_counter()
        for scope_id in scopes:
            await conn.fetch(
                "SELECT seq, ts, line FROM transcript_lines WHERE family_id = $1 AND scope_id = $2 ORDER BY seq",
                FAMILY,
                scope_id,
            )
        return time.perf_counter() - started
    finally:
        await conn.close()


async def main(scopes_n: int, lines: int) -> None:
    scopes = [f"telegram:{1000 + n}" for n in range(scopes_n)]
    async with fresh_database(migrated=True) as url:
        with tempfile.TemporaryDirectory() as tmp:
            db = HaloDB(Path(tmp) / "unused.db", url, family_id=FAMILY)
            try:
                rows = TranscriptRows(db)
                await seed(rows, scopes, lines)
                baseline = await fetch_alone(url, scopes)
                store = RecordedTranscripts(rows, Path(tmp) / "transcripts")
                started = time.perf_counter()
                for scope_id in scopes:
                    await store.take(scope_id)
                took = time.perf_counter() - started
                started = time.perf_counter()
                for scope_id in scopes:
                    await store.take(scope_id)
                again = time.perf_counter() - started
                measured = RecordedTranscripts(rows, Path(tmp) / "transcripts")  # tracemalloc slows what it traces
                tracemalloc.start()
                for scope_id in scopes:
                    await measured.take(scope_id)
                held = tracemalloc.get_traced_memory()[0]
                tracemalloc.stop()
            finally:
                await db.close()
    size = sum(store.size(scope_id) for scope_id in scopes)
    total = scopes_n * lines
    print(f"family of {scopes_n} scopes x {lines} lines = {total} lines, {size / 2**20:.1f} MiB")
    print(f"  asyncpg fetch alone (baseline)  {baseline:6.2f} s")
    print(f"  take of every scope             {took:6.2f} s  ({took / baseline:.2f}x the baseline)")
    print(f"  take again, nothing new         {again:6.3f} s")
    print(f"  held in memory                  {held / 2**20:6.1f} MiB ({held / size:.2f}x the lines' bytes)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scopes", type=int, default=20)
    parser.add_argument("--lines", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(main(args.scopes, args.lines))
