"""Benchmark: several `halo serve` processes on PostgreSQL (#24), next to one, same run.

`POST /api/chat` end to end against the stand-in model (tests/fakes' FakeOpenAI, in its own
process, answering at once), `--clients` members at once, each member's messages to one
process (as a load balancer that keeps a member on one process would):

- one process on the embedded store; one process on PostgreSQL; two processes on PostgreSQL.
  Goals: two ≥ 1.5× one (PostgreSQL); one on PostgreSQL ≥ 0.6× embedded.
- two processes with every member's messages alternating between them (half are handed over).
- failover: `kill -9` of the process holding a scope, to the first answer in that scope from
  the other (`--lease` seconds; goal ≤ lease + 5 s).
- round trips to PostgreSQL per turn on a scope the process holds (a `before_cursor_execute`
  listener on halo.db's engine, halo in this process behind its real admin server).

Run: `uv run python bench/cluster.py [--requests 400] [--clients 8] [--lease 2]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.e2e_http import wait_healthy  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.storage_support import database_url, drop_database, new_database  # noqa: E402

MEMBERS = 8


def model_main() -> None:
    """The stand-in model in a process of its own (the driver's loop is not its bottleneck);
    prints its port once it listens."""
    from tests.fakes.llm_server import FakeOpenAI

    async def run() -> None:
        fake = await FakeOpenAI(default_reply="ok").start()
        print(fake.port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


def halo_yaml(model_url: str) -> str:
    members = "\n".join(
        f"  - {{id: m{i}, name: Member {i}, role: parent, web_token: token-{i}}}" for i in range(MEMBERS)
    )
    return (
        f"members:\n{members}\nmemory:\n  distillation_enabled: false\n"
        f"llm:\n  provider: openai-compatible\n  model: fake-model\n  base_url: {model_url}\n"
        "  api_key: k\n  max_retries: 0\n"
    )


class Process:
    """One `halo serve`, its own HALO_HOME and port."""

    def __init__(self, folder: Path, model_url: str, env: dict[str, str]) -> None:
        folder.mkdir(parents=True)
        (folder / "halo.yaml").write_text(halo_yaml(model_url))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.folder = folder
        self.env = {
            **os.environ,
            **env,
            "HALO_HOME": str(folder),
            "HALO_ADMIN__PORT": str(self.port),
            "HALO_MEMORY__SEMANTIC__EMBEDDER": "none",
        }
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, http: aiohttp.ClientSession) -> None:
        log = (self.folder / "serve.log").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "halo.runtime.cli", "serve", cwd=ROOT, env=self.env, stdout=log, stderr=log
        )
        await wait_healthy(http, self.url, self.proc)

    def cpu_seconds(self) -> float:
        """CPU time the process has used so far (user + system)."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
            await asyncio.wait_for(self.proc.wait(), timeout=30)


async def drive(http: aiohttp.ClientSession, route: Callable[[int, int], str], n: int, clients: int) -> float:
    """`n` chats from `clients` members at once; turns per second. `route(member, i)`: the URL."""
    counter = iter(range(n))

    async def client(c: int) -> None:
        headers = {"Authorization": f"Bearer token-{c}"}
        for i in counter:
            async with http.post(f"{route(c, i)}/api/chat", json={"text": f"message {i}"}, headers=headers) as r:
                assert r.status == 200, await r.text()
                await r.read()

    start = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    return n / (time.perf_counter() - start)


async def throughput(
    http: aiohttp.ClientSession,
    tmp: Path,
    model_url: str,
    name: str,
    count: int,
    url: str | None,
    args: argparse.Namespace,
) -> dict[str, float]:
    env = {"HALO_STORAGE__URL": url} if url else {}
    processes = [Process(tmp / f"{name}-{n}", model_url, env) for n in range(count)]
    await asyncio.gather(*(p.start(http) for p in processes))
    try:

        def sticky(member: int, i: int) -> str:
            return processes[member % count].url

        def alternating(member: int, i: int) -> str:
            return processes[i % count].url

        await drive(http, sticky, 4 * MEMBERS, args.clients)  # warm-up: imports, first-scope files, leases
        cpu = sum(p.cpu_seconds() for p in processes)
        found = {"sticky": await drive(http, sticky, args.requests, args.clients)}
        found["cpu_ms"] = (sum(p.cpu_seconds() for p in processes) - cpu) * 1000 / args.requests
        if count > 1:
            found["alternating"] = await drive(http, alternating, args.requests, args.clients)
        return found
    finally:
        await asyncio.gather(*(p.stop() for p in processes))


async def failover(http: aiohttp.ClientSession, tmp: Path, model_url: str, url: str, lease: float) -> float:
    """Seconds from `kill -9` of a scope's holder to the first answer in that scope."""
    env = {"HALO_STORAGE__URL": url, "HALO_STORAGE__LEASE_SECONDS": str(lease)}
    a, b = Process(tmp / "failover-a", model_url, env), Process(tmp / "failover-b", model_url, env)
    await asyncio.gather(a.start(http), b.start(http))
    try:
        headers = {"Authorization": "Bearer token-0"}
        async with http.post(f"{a.url}/api/chat", json={"text": "a holds web:m0"}, headers=headers) as r:
            assert r.status == 200
        killed = time.perf_counter()
        await a.stop(signal.SIGKILL)
        async with http.post(f"{b.url}/api/chat", json={"text": "b answers it"}, headers=headers) as r:
            assert r.status == 200, await r.text()
        return time.perf_counter() - killed
    finally:
        await b.stop()


async def round_trips(tmp: Path, model_url: str, url: str, turns: int) -> float:
    """Statements halo.db's engine sends per web chat turn on a scope this process holds."""
    from sqlalchemy import event

    from admin_api.server import create_app
    from config.loader import load_settings
    from halo.runtime.app import build_halo

    home = tmp / "round-trips"
    home.mkdir()
    (home / "halo.yaml").write_text(halo_yaml(model_url))
    os.environ["HALO_STORAGE__URL"] = url
    os.environ["HALO_MEMORY__SEMANTIC__EMBEDDER"] = "none"
    halo = build_halo(load_settings(home))
    from aiohttp import web

    runner = web.AppRunner(create_app(halo))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await halo.start()
    statements: list[str] = []
    try:
        async with aiohttp.ClientSession() as http:
            headers = {"Authorization": "Bearer token-0"}

            async def turn(text: str) -> None:
                async with http.post(f"http://127.0.0.1:{port}/api/chat", json={"text": text}, headers=headers) as r:
                    assert r.status == 200

            for i in range(3):  # the lease taken, first-use reads done
                await turn(f"warm-up {i}")
            await halo.delivery.drain()

            def count(*args: object) -> None:
                statements.append(str(args[2]))

            event.listen(halo.db.engine.sync_engine, "before_cursor_execute", count)
            for i in range(turns):
                await turn(f"message {i}")
            await halo.delivery.drain()  # the batched rows of replies handed over
            await asyncio.sleep(1.5)  # the usage rows' write-behind second: their batch counts too
            event.remove(halo.db.engine.sync_engine, "before_cursor_execute", count)
    finally:
        await runner.cleanup()
        await halo.close()
        del os.environ["HALO_STORAGE__URL"]
    kinds: dict[str, int] = {}
    for sql in statements:
        word = sql.split(None, 1)[0].upper()
        kinds[word] = kinds.get(word, 0) + 1
    print(f"   statements by kind over {turns} turns: {kinds}")
    return len(statements) / turns


def verdict(met: bool) -> str:
    return "ok  " if met else "MISS"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--lease", type=float, default=2.0)
    args = parser.parse_args()

    model = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--model", cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    assert model.stdout is not None
    model_url = f"http://127.0.0.1:{int(await model.stdout.readline())}/v1"
    databases: list[str] = []

    async def database() -> str:
        databases.append(await new_database(migrated=True))
        return database_url(databases[-1])

    try:
        with tempfile.TemporaryDirectory() as folder:
            tmp = Path(folder)
            async with aiohttp.ClientSession() as http:
                print(f"{args.requests} chats, {args.clients} clients, stand-in model, {os.cpu_count()} cores\n")
                embedded = await throughput(http, tmp, model_url, "embedded", 1, None, args)
                one = await throughput(http, tmp, model_url, "pg1", 1, await database(), args)
                two = await throughput(http, tmp, model_url, "pg2", 2, await database(), args)
                for name, found in (("one process, embedded store", embedded), ("one process, PostgreSQL", one)):
                    print(f"{name:<32} {found['sticky']:7.1f} turns/s  {found['cpu_ms']:5.1f} CPU ms/turn")
                print(
                    f"two processes, PostgreSQL        {two['sticky']:7.1f} turns/s  {two['cpu_ms']:5.1f} CPU ms/turn"
                    " (each member on one process)"
                )
                print(f"two processes, alternating       {two['alternating']:7.1f} turns/s (half handed over)")
                scale, cost = two["sticky"] / one["sticky"], one["sticky"] / embedded["sticky"]
                print(f"  {verdict(scale >= 1.5)} two / one process on PostgreSQL: {scale:.2f}× (goal ≥ 1.5×)")
                print(f"  {verdict(cost >= 0.6)} PostgreSQL / embedded, one process: {cost:.2f}× (goal ≥ 0.6×)")
                took = await failover(http, tmp, model_url, await database(), args.lease)
                print(
                    f"  {verdict(took <= args.lease + 5)} failover: kill -9 to the first answer in its scope "
                    f"{took:.2f}s (lease {args.lease:g}s, goal ≤ lease + 5 s)"
                )
            print(
                f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work shares them)"
            )
            per_turn = await round_trips(tmp, model_url, await database(), 50)
            print(f"round trips to PostgreSQL per turn (a scope this process holds): {per_turn:.2f}")
    finally:
        model.terminate()
        await model.wait()
        for name in databases:
            await drop_database(name)


if __name__ == "__main__":
    if sys.argv[1:] == ["--model"]:
        model_main()
    else:
        asyncio.run(main())
