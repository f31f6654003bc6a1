"""Benchmark: `POST /api/chat` through `halo serve`, next to a minimal relay, same run, same model.

A stand-in model (tests/fakes' FakeOpenAI, answering at once) serves all three. A relay is the
least a durable chat gateway can do: parse the request, append the message fsync'd, call
the model, append the reply fsync'd, answer. Two relays: one calls the model with the OpenAI
client (as halo does), one forwards with aiohttp (the least there is). Each runs as its own
process; what each adds is its latency minus the model's own, measured directly.

Goals: halo's added latency p50 ≤ 3× the OpenAI-client relay's (issue 11) and ≤ 3× the
aiohttp relay's (issue 34).

Run: `uv run python bench/e2e_http.py [--requests 300] [--clients 8] [--rounds 6]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port  # noqa: E402
from tests.fakes.llm_server import FakeOpenAI  # noqa: E402

MEMBERS = 8


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


# -- the relay ------------------------------------------------------------------------


def relay_main(port: int, model_url: str, folder: Path, kind: str) -> None:
    """parse → append fsync'd → model → append fsync'd → answer; one file per member."""
    from aiohttp import ClientSession, web
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=model_url, api_key="k", max_retries=0)
    forward: list[ClientSession] = []  # made on the server's loop, at the first request
    fdatasync = getattr(os, "fdatasync", os.fsync)

    def append(path: Path, record: dict) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
            fdatasync(fd)
        finally:
            os.close(fd)

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        who = request.headers.get("Authorization", "anon").rsplit(" ", 1)[-1]
        path = folder / f"{who}.jsonl"
        await asyncio.to_thread(append, path, {"role": "user", "text": body["text"]})
        messages = [{"role": "user", "content": body["text"]}]
        if kind == "aiohttp":
            if not forward:
                forward.append(ClientSession())
            async with forward[0].post(
                f"{model_url}/chat/completions", json={"model": "fake-model", "messages": messages}
            ) as resp:
                text = (await resp.json())["choices"][0]["message"]["content"] or ""
        else:
            done = await client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
            text = done.choices[0].message.content or ""
        await asyncio.to_thread(append, path, {"role": "assistant", "text": text})
        return web.json_response({"reply": text})

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def close_forward(app: web.Application) -> None:
        for session in forward:
            await session.close()

    app = web.Application()
    app.on_cleanup.append(close_forward)
    app.router.add_post("/api/chat", chat)
    app.router.add_get("/healthz", health)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


# -- driving -------------------------------------------------------------------------


async def wait_healthy(http: aiohttp.ClientSession, url: str, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 240  # imports alone can take 20 s on a busy machine
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise SystemExit(f"{url}: the server exited early")
        try:
            async with http.get(f"{url}/healthz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)  # a benchmark's start-up poll, not a test
    raise SystemExit(f"{url} did not come up")


async def drive(http: aiohttp.ClientSession, url: str, n: int, clients: int) -> tuple[list[float], float]:
    """`n` chats from `clients` members at once; latencies in ms, and the wall time."""
    latencies: list[float] = []
    counter = iter(range(n))

    async def client(c: int) -> None:
        headers = {"Authorization": f"Bearer token-{c}"}
        for i in counter:
            t = time.perf_counter()
            async with http.post(f"{url}/api/chat", json={"text": f"message {i}"}, headers=headers) as r:
                assert r.status == 200, await r.text()
                await r.read()
            latencies.append((time.perf_counter() - t) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    return latencies, time.perf_counter() - start


async def direct(http: aiohttp.ClientSession, model_url: str, n: int, clients: int) -> tuple[list[float], float]:
    """The model on its own, the same request shape through the same HTTP stack."""
    latencies: list[float] = []
    counter = iter(range(n))
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}

    async def client() -> None:
        for _ in counter:
            t = time.perf_counter()
            async with http.post(f"{model_url}/chat/completions", json=body) as r:
                await r.read()
            latencies.append((time.perf_counter() - t) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, time.perf_counter() - start


async def interleaved(
    targets: dict[str, Callable[[int], Awaitable[tuple[list[float], float]]]], n: int, rounds: int
) -> dict[str, tuple[list[float], float]]:
    """`n` chats to each target, in `rounds` rounds that take the targets in turn: a busy spell of
    a noisy machine falls on all of them, not on whichever ran then."""
    runs: dict[str, tuple[list[float], float]] = {name: ([], 0.0) for name in targets}
    for r in range(rounds):
        share = n // rounds + (1 if r < n % rounds else 0)
        for name, run in targets.items():
            latencies, wall = await run(share)
            runs[name] = (runs[name][0] + latencies, runs[name][1] + wall)
    return runs


def line(name: str, lat: list[float], wall: float, base: float) -> dict[str, float]:
    p50, p99 = statistics.median(lat), percentile(lat, 99)
    print(f"{name:<28} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  {len(lat) / wall:7.0f}/s   adds p50 {p50 - base:6.2f} ms")
    return {"p50": p50, "p99": p99, "added": p50 - base}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--relay", nargs=4, metavar=("PORT", "MODEL_URL", "DIR", "KIND"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    fake = FakeOpenAI(default_reply="ok").start_in_thread()
    procs: list[asyncio.subprocess.Process] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home, relay_dir = Path(tmp) / "home", Path(tmp) / "relay"
            home.mkdir()
            relay_dir.mkdir()
            members = "\n".join(
                f"  - {{id: m{i}, name: Member {i}, role: parent, web_token: token-{i}}}" for i in range(MEMBERS)
            )
            (home / "halo.yaml").write_text(
                f"members:\n{members}\nmemory:\n  distillation_enabled: false\n"
                f"llm:\n  provider: openai-compatible\n  model: fake-model\n  base_url: {fake.base_url}\n"
                "  api_key: k\n  max_retries: 0\n"
            )
            halo_port, relay_port, plain_port = free_port(), free_port(), free_port()
            env = {**os.environ, "HALO_HOME": str(home), "HALO_ADMIN__PORT": str(halo_port)}
            log = (Path(tmp) / "halo.log").open("wb")
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "halo.runtime.cli", "serve", cwd=ROOT, env=env, stdout=log, stderr=log
                )
            )
            for port, kind in ((relay_port, "openai"), (plain_port, "aiohttp")):
                folder = relay_dir / kind
                folder.mkdir()
                procs.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable, __file__, "--relay", str(port), fake.base_url, str(folder), kind, cwd=ROOT
                    )
                )
            halo_url, relay_url = f"http://127.0.0.1:{halo_port}", f"http://127.0.0.1:{relay_port}"
            plain_url = f"http://127.0.0.1:{plain_port}"
            async with aiohttp.ClientSession() as http:
                for url, proc in zip((halo_url, relay_url, plain_url), procs, strict=True):
                    await wait_healthy(http, url, proc)
                for url in (halo_url, relay_url, plain_url):  # warm-up: imports, first-scope files, connections
                    await drive(http, url, 4 * MEMBERS, MEMBERS)
                print(
                    f"{args.requests} chats each, in {args.rounds} interleaved rounds, stand-in model answering "
                    f"at once, {os.cpu_count()} cores\n"
                )
                for clients in (1, args.clients):
                    print(f"-- {clients} client{'s' if clients > 1 else ''} at once")
                    runs = await interleaved(
                        {
                            "model": lambda n, c=clients: direct(http, fake.base_url, n, c),
                            "relay": lambda n, c=clients: drive(http, relay_url, n, c),
                            "plain": lambda n, c=clients: drive(http, plain_url, n, c),
                            "halo": lambda n, c=clients: drive(http, halo_url, n, c),
                        },
                        args.requests,
                        args.rounds,
                    )
                    model = line("model directly", *runs["model"], 0.0)
                    relay = line("relay, OpenAI client", *runs["relay"], model["p50"])
                    plain = line("relay, aiohttp", *runs["plain"], model["p50"])
                    halo = line("halo serve", *runs["halo"], model["p50"])
                    for name, base in (("the OpenAI-client relay", relay), ("the aiohttp relay", plain)):
                        ratio = halo["added"] / max(base["added"], 1e-6)
                        verdict = "ok  " if ratio <= 3 else "MISS"
                        print(f"  {verdict} halo adds {ratio:.2f}× what {name} adds (goal ≤ 3×)")
                    print()
    finally:
        for proc in procs:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), timeout=20)
        fake.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--relay":
        relay_main(int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), sys.argv[5])
    else:
        asyncio.run(main())
