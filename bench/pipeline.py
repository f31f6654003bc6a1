"""Benchmark: messages through halo's whole in-process pipeline vs a bare `Runner.run`.

Both use the same instant in-process model, so the difference is halo's own overhead:
envelope, policy, two fsync'd transcript appends, the SQL session, context assembly and
the agent run. Run: `uv run python bench/pipeline.py [--messages 2000] [--scopes 200]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from agents.testing import assistant_message

from config.loader import load_settings
from halo.pipeline.envelope import Envelope, Speaker
from halo.pipeline.scopes import resolve_scope
from halo.runtime.app import build_halo


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
    family = halo.services.family
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


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--scopes", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    model = InstantModel()
    print(f"{args.messages} messages over {args.scopes} scopes, instant in-process model, {os.cpu_count()} cores\n")

    await bare_runner(model, 50)  # warm-up
    base_lat, base_wall = await bare_runner(model, args.messages)
    base = report("baseline: bare Runner.run", base_lat, base_wall)

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "halo.yaml").write_text(family_yaml(args.scopes))
        seq_lat, seq_wall = await halo_pipeline(home, model, args.messages, args.scopes, 1)
        seq = report("halo pipeline, one at a time", seq_lat, seq_wall)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "halo.yaml").write_text(family_yaml(args.scopes))
        con_lat, con_wall = await halo_pipeline(home, model, args.messages, args.scopes, args.concurrency)
        report(f"halo pipeline, {args.concurrency} scopes at once", con_lat, con_wall)

    print(
        f"\nhalo overhead (pipeline − baseline): p50 {seq['p50'] - base['p50']:.3f} ms, "
        f"p99 {seq['p99'] - base['p99']:.3f} ms; goal p50 ≤ 3 ms, p99 ≤ 15 ms, ≥ 300 msg/s"
    )


if __name__ == "__main__":
    asyncio.run(main())
