"""Benchmark: reminders at scale (issue 26).

1. `halo serve` start-up (until /healthz answers) with 10,000 pending reminders, against the
   same with none: interleaved fresh processes, median of `--repeat`; limit 1.2x.
2. 1,000 reminders due in the same minute, fired by the scheduler through the real `Delivery`
   into the web inbox: all delivered (outbox rows `sent`) within 60 s.

Run: `uv run python bench/reminders.py [--repeat 3]`. Exits 1 when a limit is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

START_LIMIT = 1.2
FIRE_LIMIT = 60.0
FAMILY = """\
family: {name: Sharma, timezone: Europe/London}
members:
  - {id: wags, name: Wags, role: parent, web_token: wags-token}
  - {id: mom,  name: Mom,  role: parent, web_token: mom-token}
  - {id: aarav, name: Aarav, role: child, age_group: adolescent, web_token: aarav-token}
owner: wags
memory: {semantic: {enabled: false}}
"""
TARGETS = ("wags", "mom", "aarav")


async def make_table(home: Path) -> None:
    from halo.outbound import outbox
    from halo.reminders.store import metadata
    from halo.storage import HaloDB

    db = HaloDB(home / "halo.db")
    async with db.write(metadata, outbox.metadata):
        pass
    await db.close()


def home_with(pending: int, due_in: timedelta) -> Path:
    home = Path(tempfile.mkdtemp(prefix="halo-bench-reminders-"))
    (home / "halo.yaml").write_text(FAMILY)
    asyncio.run(make_table(home))
    due = float(int((datetime.now(UTC) + due_in).timestamp()))
    rows = [
        ("mom", TARGETS[i % 3], f"reminder {i}", "web:mom", due, due + (i % 50), due + (i % 50), 0, 0, "pending", 0)
        for i in range(pending)
    ]
    with sqlite3.connect(home / "halo.db") as db:
        db.executemany(
            "INSERT INTO reminders (set_by, target, text, scope_id, created_at, due_at, occurrence_at, urgent, held,"
            " state, fired) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    return home


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_seconds(home: Path) -> float:
    port = free_port()
    env = {**os.environ, "HALO_HOME": str(home), "HALO_ADMIN__PORT": str(port)}
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "halo.runtime.cli", "serve"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"halo serve exited early in {home}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return time.perf_counter() - began
            except OSError:
                time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()


async def fire_thousand(home: Path) -> tuple[float, int]:
    from config.loader import load_settings
    from halo.runtime.app import build_halo

    halo = build_halo(load_settings(home))
    try:
        began = time.perf_counter()
        await halo.start_background()
        delivery = halo.delivery
        while delivery.counts["sent"] < 1000 and time.perf_counter() - began < FIRE_LIMIT * 2:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        return time.perf_counter() - began, delivery.counts["sent"]
    finally:
        await halo.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    empty, full = home_with(0, timedelta(days=1)), home_with(10_000, timedelta(days=1))
    times: dict[str, list[float]] = {"none": [], "10,000": []}
    for _ in range(args.repeat):
        times["none"].append(start_seconds(empty))
        times["10,000"].append(start_seconds(full))
    none, ten_k = statistics.median(times["none"]), statistics.median(times["10,000"])
    ratio = ten_k / none
    print(f"halo serve start, no reminders:      {none:.2f} s (median of {args.repeat})")
    print(f"halo serve start, 10,000 pending:    {ten_k:.2f} s  ratio {ratio:.2f} (limit {START_LIMIT})")
    seconds, sent = asyncio.run(fire_thousand(home_with(1000, timedelta(seconds=-30))))
    print(f"1,000 reminders due at once: {sent} delivered in {seconds:.1f} s (limit {FIRE_LIMIT:.0f} s)")
    ok = ratio <= START_LIMIT and sent >= 1000 and seconds <= FIRE_LIMIT
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
