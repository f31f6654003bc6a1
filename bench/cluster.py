"""Benchmark: `halo serve` processes on PostgreSQL (#31), one active per family, same run.

`POST /api/chat` end to end against the stand-in model (tests/fakes' FakeOpenAI, in its own
process, answering at once), `--clients` members at once:

- one process on the embedded store and one on PostgreSQL: turns per second (goal for
  PostgreSQL ≥ 0.8× the embedded store). With `--rounds N` the two alternate N times
  (E,P,P,E,E,P,…, a fresh process each time), each round's ratio is shown and the median is
  what meets the goal or not: drift in the machine's load falls on both stores alike;
- forwarding: the same requests, one at a time, sent to the active process and to the
  standby (which forwards them) in interleaved batches (D,F then F,D, …); the median of the
  batches' differences of p50 (goal ≤ 3 ms);
- config: an edit saved in a standby's halo.yaml, to every process running it (goal ≤ 3 s);
- failover: `kill -9` of the active process, to the first answer from the standby with the
  default lease (goal ≤ 3 s: the holder's database session ends with it); and SIGSTOP of the
  active one (its session stays: goal ≤ lease + 3 s);
- round trips to PostgreSQL per turn (`HaloDB.watch`: each statement halo.db sends,
  halo in this process behind its real admin server).

Run: `uv run python bench/cluster.py [--rounds 4] [--requests 300] [--clients 8] [--lease 10]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
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
FORWARD_BATCH = 10  # requests a batch, direct or forwarded


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
    http: aiohttp.ClientSession, tmp: Path, model_url: str, name: str, url: str | None, args: argparse.Namespace
) -> dict[str, float]:
    env = {"HALO_STORAGE__URL": url} if url else {}
    process = Process(tmp / name, model_url, env)
    await process.start(http)
    try:
        await wait_active(http, process)
        await drive(http, lambda member, i: process.url, 4 * MEMBERS, args.clients)  # warm-up
        cpu = process.cpu_seconds()
        found = {"turns": await drive(http, lambda member, i: process.url, args.requests, args.clients)}
        found["cpu_ms"] = (process.cpu_seconds() - cpu) * 1000 / args.requests
        return found
    finally:
        await process.stop()


async def role(http: aiohttp.ClientSession, process: Process) -> str | None:
    try:
        async with http.get(f"{process.url}/livez", timeout=aiohttp.ClientTimeout(total=2)) as r:
            return str((await r.json())["role"]) if r.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, KeyError):
        return None


async def wait_active(http: aiohttp.ClientSession, *processes: Process) -> Process:
    for _ in range(600):
        for process in processes:
            if await role(http, process) in ("active", "alone"):
                return process
        await asyncio.sleep(0.1)
    raise RuntimeError("no process became active")


async def latencies(http: aiohttp.ClientSession, url: str, n: int) -> list[float]:
    """Milliseconds of `n` chats sent one after another."""
    found = []
    headers = {"Authorization": "Bearer token-0"}
    for i in range(n):
        start = time.perf_counter()
        async with http.post(f"{url}/api/chat", json={"text": f"forwarded? {i}"}, headers=headers) as r:
            assert r.status == 200, await r.text()
            await r.read()
        found.append((time.perf_counter() - start) * 1000)
    return found


async def first_answer(http: aiohttp.ClientSession, process: Process, since: float) -> float:
    """Seconds from `since` to the first 200 from `process` (a 503 while nobody serves is retried)."""
    headers = {"Authorization": "Bearer token-1"}
    while True:
        try:
            async with http.post(
                f"{process.url}/api/chat",
                json={"text": "anyone there?"},
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as r:
                if r.status == 200:
                    return time.perf_counter() - since
        except (aiohttp.ClientError, TimeoutError):
            pass
        await asyncio.sleep(0.05)


async def config_spread(http: aiohttp.ClientSession, processes: list[Process], edited_in: Process) -> float:
    """Seconds from saving an edit of one process's halo.yaml until every process runs it."""

    async def version(process: Process) -> int | None:
        async with http.get(f"{process.url}/status", headers={"Authorization": "Bearer token-0"}) as r:
            return int((await r.json())["config_reload"]["version"]) if r.status == 200 else None

    before = await version(edited_in)
    assert before is not None
    path = edited_in.folder / "halo.yaml"
    path.write_text(path.read_text().replace("members:\n", "members:\n  - {id: nani, name: Nani, role: parent}\n", 1))
    saved = time.perf_counter()
    while (time.perf_counter() - saved) < 60:
        if all((v or 0) > before for v in [await version(p) for p in processes]):
            return time.perf_counter() - saved
        await asyncio.sleep(0.02)
    raise RuntimeError("an edit of halo.yaml did not reach every process within 60 s")


async def two_processes(
    http: aiohttp.ClientSession, tmp: Path, model_url: str, url: str, args: argparse.Namespace
) -> dict[str, float]:
    """Forwarding's added p50, then failover after kill -9, then after SIGSTOP."""
    env = {"HALO_STORAGE__URL": url, "HALO_STORAGE__LEASE_SECONDS": str(args.lease)}
    processes = [Process(tmp / f"two-{n}", model_url, env) for n in range(3)]
    await asyncio.gather(*(p.start(http) for p in processes))
    try:
        active = await wait_active(http, *processes)
        standby, spare = [p for p in processes if p is not active]
        await latencies(http, standby.url, 20)  # warm-up: both paths
        await latencies(http, active.url, 20)
        direct, forwarded, added = [], [], []
        for batch in range(args.forward_rounds):  # interleaved, so the machine's load falls on both alike
            if batch % 2:
                here_f = await latencies(http, standby.url, FORWARD_BATCH)
                here_d = await latencies(http, active.url, FORWARD_BATCH)
            else:
                here_d = await latencies(http, active.url, FORWARD_BATCH)
                here_f = await latencies(http, standby.url, FORWARD_BATCH)
            direct += here_d
            forwarded += here_f
            added.append(statistics.median(here_f) - statistics.median(here_d))
        found = {
            "direct_p50": statistics.median(direct),
            "forwarded_p50": statistics.median(forwarded),
            "added": statistics.median(added),
        }
        quartiles = statistics.quantiles(added, n=4)
        found["added_p25"], found["added_p75"] = quartiles[0], quartiles[2]
        found["config"] = await config_spread(http, processes, standby)  # an edit through a standby
        killed = time.perf_counter()
        await active.stop(signal.SIGKILL)
        found["kill9"] = await first_answer(http, standby, killed)
        now_active = await wait_active(http, standby, spare)
        other = spare if now_active is standby else standby
        assert now_active.proc is not None
        frozen = time.perf_counter()
        now_active.proc.send_signal(signal.SIGSTOP)
        found["sigstop"] = await first_answer(http, other, frozen)
        now_active.proc.send_signal(signal.SIGCONT)
        return found
    finally:
        await asyncio.gather(*(p.stop() for p in processes), return_exceptions=True)


async def round_trips(tmp: Path, model_url: str, url: str, turns: int) -> float:
    """Statements halo.db's engine sends per web chat turn on a scope this process holds."""
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
    if halo.cluster is not None:  # the family taken (no other process): its activation has run
        await halo.cluster.activated()
    statements: list[str] = []
    try:
        async with aiohttp.ClientSession() as http:
            headers = {"Authorization": "Bearer token-0"}

            async def turn(text: str) -> None:
                async with http.post(f"http://127.0.0.1:{port}/api/chat", json={"text": text}, headers=headers) as r:
                    assert r.status == 200

            for i in range(3):  # first-use reads done
                await turn(f"warm-up {i}")
            await halo.delivery.drain()

            unwatch = halo.db.watch(statements.append)
            for i in range(turns):
                await turn(f"message {i}")
            await halo.delivery.drain()  # the batched rows of replies handed over
            await asyncio.sleep(1.5)  # the usage rows' write-behind second: their batch counts too
            unwatch()
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
    parser.add_argument("--requests", type=int, help="chats a measure (default 400; 300 a round with --rounds)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--lease", type=float, default=10.0, help="storage.lease_seconds (the default: 10)")
    parser.add_argument("--forward-rounds", type=int, default=20, help="batches each of direct and forwarded")
    parser.add_argument(
        "--rounds", type=int, default=1, help="embedded and PostgreSQL alternated this often (E,P,P,E,…)"
    )
    args = parser.parse_args()
    if args.requests is None:
        args.requests = 400 if args.rounds == 1 else 300

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
                ratios = []
                for n in range(args.rounds):
                    found: dict[str, dict[str, float]] = {}
                    # E,P then P,E, …: the store that ran last runs first next, so neither always follows the other
                    order = ("postgresql", "embedded") if n % 2 else ("embedded", "postgresql")
                    for store in order:
                        url = await database() if store == "postgresql" else None
                        found[store] = await throughput(http, tmp, model_url, f"{store}-{n}", url, args)
                    ratios.append(found["postgresql"]["turns"] / found["embedded"]["turns"])
                    print(f"round {n + 1} ({order[0][0].upper()},{order[1][0].upper()}):")
                    for name, store in (
                        ("one process, embedded store", "embedded"),
                        ("one process, PostgreSQL", "postgresql"),
                    ):
                        one = found[store]
                        print(f"  {name:<30} {one['turns']:7.1f} turns/s  {one['cpu_ms']:5.1f} CPU ms/turn")
                    print(f"  PostgreSQL / embedded: {ratios[-1]:.2f}×")
                cost = statistics.median(ratios)
                each = ", ".join(f"{r:.2f}" for r in ratios)
                print(
                    f"  {verdict(cost >= 0.8)} PostgreSQL / embedded, one process: {cost:.2f}× "
                    f"(median of {len(ratios)} round(s): {each}; goal ≥ 0.8×)"
                )
                two = await two_processes(http, tmp, model_url, await database(), args)
                added = two["added"]
                print(
                    f"  {verdict(added <= 3)} forwarding: p50 {two['direct_p50']:.1f} ms to the active process, "
                    f"{two['forwarded_p50']:.1f} ms through a standby: {added:+.1f} ms "
                    f"(median of {args.forward_rounds} batches' differences, quartiles "
                    f"{two['added_p25']:+.1f}..{two['added_p75']:+.1f}; goal ≤ 3 ms)"
                )
                print(
                    f"  {verdict(two['config'] <= 3)} config: an edit saved on a standby runs on all three "
                    f"processes {two['config']:.2f}s later (goal ≤ 3 s)"
                )
                print(
                    f"  {verdict(two['kill9'] <= 3)} failover: kill -9 of the active to the first answer "
                    f"{two['kill9']:.2f}s (lease {args.lease:g}s, goal ≤ 3 s)"
                )
                print(
                    f"  {verdict(two['sigstop'] <= args.lease + 3)} failover: SIGSTOP of the active to the first "
                    f"answer {two['sigstop']:.2f}s (goal ≤ lease + 3 s)"
                )
            print(
                f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work shares them)"
            )
            per_turn = await round_trips(tmp, model_url, await database(), 50)
            print(f"round trips to PostgreSQL per turn: {per_turn:.2f}")
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
