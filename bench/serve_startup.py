"""Benchmark: how soon `halo serve` speaks, and what it holds, against `import agents`.

Issue 23 (start and memory). Three ratios, all measured in this one run against a fresh
interpreter that only ran `import agents` (so the machine's load weighs on both alike):

- start → a `serve` config error printed and exited: ≤ 0.3 × `import agents` time;
- start → the first `/healthz` answer: ≤ 0.5 × `import agents` time;
- start → the first web chat answered (ready, not merely listening): ≤ 1.3 × (issue 34);
- RSS of `halo serve` serving a family (web and Telegram, Telegram against the fake Bot API
  server, the model the fake OpenAI server) after 100 turns (half web, half Telegram):
  ≤ 1.7 × the RSS of a process that only ran `import agents` (issue 34; the libraries halo
  needs put the floor near 1.5 ×).

Times are the median of `--repeat` interleaved runs. Exits 1 when a ratio is over its limit.

Run: `uv run python bench/serve_startup.py [--repeat 5] [--turns 100]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import FAMILY_YAML, free_port, llm_yaml  # noqa: E402
from tests.fakes.llm_server import FakeOpenAI  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.telegram_support import telegram_yaml  # noqa: E402

LIMITS = {"config error": 0.3, "first /healthz": 0.5, "first chat": 1.3, "RSS after turns": 1.7}
RSS_PROBE = "import agents\nprint(open('/proc/self/status').read())"
# Children write and reuse bytecode, as on a machine without PYTHONDONTWRITEBYTECODE (this one sets
# it): otherwise every `halo serve` compiles halo's own modules again, ~0.37 s a start that no
# user's second start pays.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
MOM = 1002  # a parent with a Telegram id in FAMILY_YAML
WEB = {"Authorization": "Bearer wags-token", "Content-Type": "application/json"}


def rss_kib(status_text: str) -> int:
    line = next(line for line in status_text.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1])


def import_agents() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import agents"], cwd=ROOT, env=CHILD_ENV, check=True, capture_output=True)
    return time.perf_counter() - started


def serve(home: Path, port: int) -> subprocess.Popen[str]:
    env = {**CHILD_ENV, "HALO_HOME": str(home), "HALO_ADMIN__PORT": str(port)}
    return subprocess.Popen(
        [sys.executable, "-m", "halo.runtime.cli", "serve"],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def config_error(home: Path) -> float:
    started = time.perf_counter()
    proc = serve(home, free_port())
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 2 or "llm.colour" not in err:
        raise SystemExit(f"serve with a config typo did not say so: {proc.returncode} {err}")
    return time.perf_counter() - started


def answers(url: str, headers: dict[str, str] | None = None) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


def first_healthz(home: Path) -> float:
    port = free_port()
    started = time.perf_counter()
    proc = serve(home, port)
    try:
        while not answers(f"http://127.0.0.1:{port}/healthz"):
            if proc.poll() is not None or time.perf_counter() - started > 120:
                raise SystemExit(f"halo serve never answered /healthz: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.01)  # polling a port that is not open yet: nothing to wait on
        return time.perf_counter() - started
    finally:
        proc.terminate()
        proc.communicate(timeout=120)


def first_chat(home: Path) -> float:
    """Start → the first web chat's reply: what a person waits for after a restart."""
    port = free_port()
    started = time.perf_counter()
    proc = serve(home, port)
    body = json.dumps({"text": "are you up?"}).encode()
    try:
        while True:
            if proc.poll() is not None or time.perf_counter() - started > 120:
                raise SystemExit(f"halo serve never answered a chat: {proc.stderr.read() if proc.stderr else ''}")
            request = urllib.request.Request(f"http://127.0.0.1:{port}/api/chat", data=body, headers=WEB)
            try:
                with urllib.request.urlopen(request, timeout=60) as resp:
                    if resp.status == 200 and json.load(resp).get("reply"):
                        return time.perf_counter() - started
            except OSError:  # not listening yet, or 503 while it starts
                time.sleep(0.01)  # polling a port that is not open yet: nothing to wait on
    finally:
        proc.terminate()
        proc.communicate(timeout=120)


class TelegramInThread:
    """The fake Bot API server on its own loop, driven from this (synchronous) bench."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.fake = self.call(FakeTelegram().start())

    def call(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    async def _say(self, text: str) -> int:
        self.fake.chat(MOM)
        before = len(self.fake.sent(MOM))
        self.fake.message(MOM, MOM, text)
        await self.fake.wait_for(lambda: len(self.fake.sent(MOM)) > before, within=120, what="a reply")
        return len(self.fake.sent(MOM))

    def say(self, text: str) -> None:
        self.call(self._say(text))

    def close(self) -> None:
        self.call(self.fake.close())
        self.loop.call_soon_threadsafe(self.loop.stop)


def rss_after_turns(home: Path, llm: FakeOpenAI, turns: int) -> int:
    telegram = TelegramInThread()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(llm) + telegram_yaml(telegram.fake.base_url))
    port = free_port()
    proc = serve(home, port)
    try:
        deadline = time.monotonic() + 180
        while not answers(f"http://127.0.0.1:{port}/status", WEB):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"halo serve did not start: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.05)
        for turn in range(turns):
            if turn % 2:
                telegram.say(f"telegram turn {turn}")
            else:
                body = json.dumps({"text": f"web turn {turn}"}).encode()
                request = urllib.request.Request(f"http://127.0.0.1:{port}/api/chat", data=body, headers=WEB)
                with urllib.request.urlopen(request, timeout=120) as resp:
                    json.load(resp)
        return rss_kib(Path(f"/proc/{proc.pid}/status").read_text())
    finally:
        proc.terminate()
        proc.communicate(timeout=120)
        telegram.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--turns", type=int, default=100)
    opts = parser.parse_args()
    llm = FakeOpenAI(default_reply="Noted.").start_in_thread()
    times: dict[str, list[float]] = {"import agents": [], "config error": [], "first /healthz": [], "first chat": []}
    with tempfile.TemporaryDirectory() as tmp:
        typo, good, busy = Path(tmp, "typo"), Path(tmp, "good"), Path(tmp, "busy")
        for home in (typo, good, busy):
            home.mkdir()
        (typo / "halo.yaml").write_text(FAMILY_YAML + "llm:\n  provider: openai-compatible\n  colour: blue\n")
        (good / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(llm))
        import_agents(), config_error(typo), first_healthz(good)  # warm the bytecode and file caches
        for _ in range(opts.repeat):
            times["import agents"].append(import_agents())
            times["config error"].append(config_error(typo))
            times["first /healthz"].append(first_healthz(good))
            times["first chat"].append(first_chat(good))
        agents_rss = rss_kib(
            subprocess.run(
                [sys.executable, "-c", RSS_PROBE], cwd=ROOT, env=CHILD_ENV, check=True, capture_output=True, text=True
            ).stdout
        )
        serve_rss = rss_after_turns(busy, llm, opts.turns)
    llm.stop()
    medians = {name: statistics.median(runs) for name, runs in times.items()}
    base = medians["import agents"]
    print(f"median of {opts.repeat} interleaved runs, fresh interpreter every time")
    print("| measure | value | ratio to `import agents` | limit |")
    print("| --- | --- | --- | --- |")
    print(f"| import agents | {base:.3f} s | 1.00 | |")
    ratios = {name: medians[name] / base for name in ("config error", "first /healthz", "first chat")}
    for name, ratio in ratios.items():
        print(f"| start → {name} | {medians[name]:.3f} s | {ratio:.2f} | ≤ {LIMITS[name]} |")
    ratios["RSS after turns"] = serve_rss / agents_rss
    print(f"| RSS of `import agents` | {agents_rss / 1024:.0f} MiB | 1.00 | |")
    print(
        f"| RSS of `halo serve` after {opts.turns} turns | {serve_rss / 1024:.0f} MiB | "
        f"{ratios['RSS after turns']:.2f} | ≤ {LIMITS['RSS after turns']} |"
    )
    over = [name for name, ratio in ratios.items() if ratio > LIMITS[name]]
    print("all within limits" if not over else f"OVER: {', '.join(over)}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
