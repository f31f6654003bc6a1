"""Benchmark: messages through halo's whole in-process pipeline vs a bare `Runner.run`.

Both use the same instant in-process model, so the difference is halo's own overhead:
envelope, policy, two fsync'd transcript appends (the session is read from the transcript),
context assembly and the agent run. halo runs with its start-up heap frozen, as `halo serve`
does (halo/runtime/heap.py). Then the memory a scope costs: 10,000 scopes each
taken through one turn of the session layer. Goals (issue 11) are checked against
figures measured in the same run.

Run: `uv run python bench/pipeline.py [--messages 1000] [--scopes 200] [--rss-scopes 10000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from agents.testing import assistant_message

from config.loader import load_settings
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.runtime.app import build_halo
from halo.runtime.heap import freeze_start_up_heap
from transcripts import TranscriptLine
from transcripts.lines import Message, Reply


class InstantModel(Model):
    """Answers at once: the model's own time is zero, so what remains is the pipeline's."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=[assistant_message("ok")], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        raise NotImplementedError("the benchmark runs non-streaming")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def report(name: str, latencies: list[float], wall: float) -> dict[str, float]:
    ms = [v * 1000 for v in latencies]
    figures = {
        "p50": statistics.median(ms),
        "p99": percentile(ms, 99),
        "rate": len(latencies) / wall,
    }
    print(f"{name:<34} p50 {figures['p50']:7.3f} ms   p99 {figures['p99']:7.3f} ms   {figures['rate']:8.0f} msg/s")
    return figures


async def bare_runner(model: Model, n: int) -> tuple[list[float], float]:
    agent = Agent(name="halo", instructions="You are halo.", model=model)
    config = RunConfig(tracing_disabled=True)
    latencies: list[float] = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        await Runner.run(agent, f"message {i}", run_config=config)
        latencies.append(time.perf_counter() - t)
    return latencies, time.perf_counter() - start


def family_yaml(scopes: int) -> str:
    members = "\n".join(f"  - {{id: m{i}, name: Member {i}, role: parent}}" for i in range(scopes))
    return f"members:\n{members}\nmemory:\n  distillation_enabled: false\n"


async def halo_pipeline(home: Path, model: Model, n: int, scopes: int, concurrency: int) -> tuple[list[float], float]:
    halo = build_halo(load_settings(home), model=model)
    freeze_start_up_heap()  # as `halo serve` does once it has started
    family = halo.family
    envelopes = []
    for i in range(n):
        member = family.members[i % scopes]
        envelopes.append(
            Envelope(
                platform="web",
                scope=resolve_scope(family, f"web:{member.id}"),
                speaker=Speaker(member.id, member, member.name),
                text=f"message {i}",
            )
        )
    latencies: list[float] = []
    queue: asyncio.Queue[Envelope] = asyncio.Queue()
    for env in envelopes:
        queue.put_nowait(env)

    async def worker() -> None:
        while not queue.empty():
            env = queue.get_nowait()
            t = time.perf_counter()
            reply = await halo.gateway.handle(env)
            latencies.append(time.perf_counter() - t)
            assert reply.text == "ok", reply

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    await halo.close()
    return latencies, wall


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def scopes_rss(home: Path, n: int) -> float:
    """RSS growth after `n` scopes each go once through what a turn keeps per scope: the scope
    lock, the user's line, the session read, the SDK's saves (input recognised, reply held),
    the reply line. (A family of `n` members would measure the policy engine instead.)"""
    halo = build_halo(load_settings(home), model=InstantModel())
    services, gateway = halo, halo.gateway

    def line(scope_id: str, kind: type[Message | Reply], text: str) -> TranscriptLine:
        return kind(uuid.uuid4().hex, datetime.now(UTC), scope_id, text, platform="telegram")

    async def touch(i: int) -> None:
        scope_id = f"telegram:-{1000000 + i}"
        async with gateway.locks.of(scope_id):
            await services.transcripts.append(line(scope_id, Message, f"hello {i}"))
            session = services.sessions.get(scope_id)
            await session.get_items()
            await session.add_items([{"role": "user", "content": f"hello {i}"}])
            await session.add_items(
                [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]
            )
            await services.transcripts.append(line(scope_id, Reply, "ok"))
            await services.sessions.settle(scope_id)

    for i in range(200):  # warm-up: imports, thread pools, allocator arenas
        await touch(n + i)
    gc.collect()
    before = rss_mb()
    for start in range(0, n, 64):
        await asyncio.gather(*(touch(i) for i in range(start, min(n, start + 64))))
    gc.collect()
    grown = rss_mb() - before
    await halo.close()
    return grown


def check(name: str, value: float, limit: float, unit: str = "") -> bool:
    ok = value <= limit
    print(f"  {'ok  ' if ok else 'MISS'} {name}: {value:.2f}{unit} (goal ≤ {limit:.2f}{unit})")
    return ok


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--scopes", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rss-scopes", type=int, default=10000)
    args = parser.parse_args()
    model = InstantModel()
    print(f"{args.messages} messages over {args.scopes} scopes, instant in-process model, {os.cpu_count()} cores\n")

    await bare_runner(model, 50)  # warm-up
    base_lat, base_wall = await bare_runner(model, args.messages)
    base = report("baseline: bare Runner.run", base_lat, base_wall)

    with tempfile.TemporaryDirectory() as tmp:  # warm-up: the first turns a process ever runs (lazy imports)
        home = Path(tmp)
        (home / "halo.yaml").write_text(family_yaml(10))
        await halo_pipeline(home, model, 100, 10, 1)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "halo.yaml").write_text(family_yaml(args.scopes))
        seq_lat, seq_wall = await halo_pipeline(home, model, args.messages, args.scopes, 1)
        seq = report("halo pipeline, one at a time", seq_lat, seq_wall)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "halo.yaml").write_text(family_yaml(args.scopes))
        con_lat, con_wall = await halo_pipeline(home, model, args.messages, args.scopes, args.concurrency)
        con = report(f"halo pipeline, {args.concurrency} scopes at once", con_lat, con_wall)
    grown = 0.0
    if args.rss_scopes:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            (home / "halo.yaml").write_text(family_yaml(2))
            grown = await scopes_rss(home, args.rss_scopes)
        print(f"{args.rss_scopes} scopes touched once each: RSS grew {grown:.1f} MB")

    print("\ngoals (issue 11), from this run:")
    check("halo p50 / bare p50", seq["p50"] / base["p50"], 2.0, "×")
    check("halo p99 / bare p99", seq["p99"] / base["p99"], 3.0, "×")
    check(f"bare rate / {args.concurrency}-scope rate", base["rate"] / con["rate"], 1 / 0.6, "×")
    check(f"{args.concurrency}-scope p99 / halo p50", con["p99"] / seq["p50"], 10.0, "×")
    if args.rss_scopes:
        check(f"RSS growth over {args.rss_scopes} scopes", grown, 30.0, " MB")
    # Little's law: with `concurrency` turns always in flight, the mean latency is concurrency / rate
    mean_ms = 1000 * args.concurrency / con["rate"]
    needed = 1000 * args.concurrency / (10 * seq["p50"])
    print(
        f"\n{args.concurrency} turns always in flight: mean latency = {args.concurrency} / rate = {mean_ms:.1f} ms; "
        f"a p99 within 10× the one-at-a-time p50 ({10 * seq['p50']:.1f} ms) needs a rate of at least "
        f"{needed:.0f}/s ({needed / base['rate']:.2f}× bare), on one event loop."
    )


if __name__ == "__main__":
    asyncio.run(main())
