"""kill -9 under load: nothing acknowledged is lost, from the transcript or from the model's history.

`halo serve` runs as a real process against the fake model; several web members chat at
once; the process is killed with SIGKILL while replies are in flight, started again, and
killed again. Afterwards every message that got a reply is in its scope's transcript, no
line is corrupt, and the first model request of each scope after the last restart carries
that scope's last acknowledged message: the history *is* the transcript.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests import processes
from tests.conftest import free_port, llm_yaml
from tests.fakes.llm_server import FakeOpenAI, Reply
from tests.transcript_support import transcript_store
from tests.waiting import eventually

pytestmark = pytest.mark.slow  # halo serve as a process, killed and started again

ROOT = Path(__file__).resolve().parent.parent
SCOPES = 6
KILLS = 2  # each start of `halo serve` costs seconds (imports): two kills and a last start
ACKS_BEFORE_KILL = 12  # replies acknowledged in a round before it is killed (all scopes still sending)


def family_yaml(fake: FakeOpenAI) -> str:
    members = "\n".join(
        f"  - {{id: m{i}, name: Member {i}, role: parent, web_token: token-{i}}}" for i in range(SCOPES)
    )
    return f"family: {{name: Test}}\nmembers:\n{members}\nmemory:\n  distillation_enabled: false\n" + llm_yaml(fake)


@pytest.fixture
def slow_llm() -> Iterator[FakeOpenAI]:
    """Each answer takes a little while, so a kill lands with turns in flight."""
    fake = FakeOpenAI(responder=lambda body: Reply(text="noted", delay=0.02)).start_in_thread()
    yield fake
    fake.stop()


class Serve:
    """`halo serve` as a process; output goes to files so a full pipe never stalls it."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.env = env or {}  # settings for this run (HALO_… overrides)
        self.port = free_port()
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, http: aiohttp.ClientSession) -> None:
        self.starts += 1
        env = {**os.environ, **self.env, "HALO_HOME": str(self.home), "HALO_ADMIN__PORT": str(self.port)}
        with (self.home / f"serve-{self.starts}.log").open("wb") as log:
            self.proc = await processes.start(
                sys.executable,
                "-m",
                "halo.runtime.cli",
                "serve",
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        async def healthy() -> bool:
            assert self.proc is not None and self.proc.returncode is None, "halo serve exited early"
            try:
                async with http.get(f"{self.url}/healthz", timeout=aiohttp.ClientTimeout(total=2)) as r:
                    return r.status == 200
            except (aiohttp.ClientError, TimeoutError):  # a busy machine: ask again
                return False

        await eventually(
            healthy, within=180, what="halo serve to answer /healthz"
        )  # imports take long on a busy machine

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.proc.wait(), timeout=20)


async def chat(http: aiohttp.ClientSession, url: str, scope: int, text: str) -> bool:
    """True when halo answered: the message is acknowledged."""
    headers = {"Authorization": f"Bearer token-{scope}"}
    try:
        async with http.post(f"{url}/api/chat", json={"text": text}, headers=headers) as r:
            return r.status == 200 and (await r.json())["reply"] == "noted"
    except (TimeoutError, aiohttp.ClientError):
        return False


async def test_kill_9_under_load_loses_nothing(tmp_path: Path, slow_llm: FakeOpenAI) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(family_yaml(slow_llm))
    serve = Serve(home)
    acknowledged: dict[int, list[str]] = {i: [] for i in range(SCOPES)}
    sent = 0

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:
        for round_ in range(KILLS):
            await serve.start(http)
            enough = asyncio.Event()
            acked_this_round = 0

            async def talk(scope: int, round_: int = round_, enough: asyncio.Event = enough) -> None:
                nonlocal acked_this_round, sent
                n = 0
                while True:  # until the kill cuts it off
                    text = f"scope {scope} round {round_} message {n}"
                    sent += 1
                    if not await chat(http, serve.url, scope, text):
                        return
                    acknowledged[scope].append(text)
                    acked_this_round += 1
                    if acked_this_round >= ACKS_BEFORE_KILL:
                        enough.set()
                    n += 1

            talkers = [asyncio.create_task(talk(i)) for i in range(SCOPES)]
            await asyncio.wait_for(enough.wait(), timeout=60)
            await serve.kill()  # SIGKILL with every scope mid-conversation
            await asyncio.wait_for(asyncio.gather(*talkers), timeout=30)

        await serve.start(http)
        before = len(slow_llm.model_requests)
        for i in range(SCOPES):
            assert await chat(http, serve.url, i, f"scope {i} after the last restart")
        await serve.kill()

    total = sum(len(texts) for texts in acknowledged.values())
    assert total >= KILLS * ACKS_BEFORE_KILL
    written: dict[int, list[bytes]] = {}
    async with transcript_store(home) as store:  # the store of record: the files, or PostgreSQL's rows
        for i in range(SCOPES):
            await store.ready(f"web:m{i}")
            written[i] = [raw for _, raw in reversed(list(store.raw_reversed(f"web:m{i}")))]
    for i in range(SCOPES):
        lines = [json.loads(raw) for raw in written[i]]  # every line whole: none corrupt
        said = {line["text"] for line in lines if line["role"] == "user"}
        assert not [t for t in acknowledged[i] if t not in said], f"web:m{i} lost acknowledged messages"

        first_after = next(  # the reply's request: the last to carry it (a routing triage call comes first)
            r.json["messages"]
            for r in reversed(slow_llm.model_requests[before:])
            if f"scope {i} after the last restart" in json.dumps(r.json["messages"])
        )
        user_texts = [m["content"] for m in first_after if m["role"] == "user"]
        assert user_texts[-1] == f"scope {i} after the last restart"
        if acknowledged[i]:
            assert acknowledged[i][-1] in user_texts, f"web:m{i}: the model forgot the last acknowledged message"
    print(f"\n{KILLS} kills survived, {total} acknowledged messages of {sent} sent, 0 lost")
