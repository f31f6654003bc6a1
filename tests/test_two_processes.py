"""Two `halo serve` processes serving one family on one PostgreSQL database (#24).

Each has its own HALO_HOME and port, the same halo.yaml and `storage.url`, and a short lease
(2 s). Web chat messages go to both for several scopes: a scope is served by the process that
took its lease, and a message that arrives at the other is handed over and answered all the
same. Then the leader is killed with SIGKILL while every scope is talking: within `lease_seconds` +
5 s the survivor serves every scope and leads (the singletons moved), no acknowledged message
is answered twice, every message sent to the survivor after the kill is answered, and the
first model request of each scope on the survivor carries that scope's last acknowledged
message (its transcript came from PostgreSQL when the survivor took the scope).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from tests.fakes.llm_server import FakeOpenAI, Reply
from tests.storage_support import fresh_database
from tests.test_session_durability import SCOPES, Serve, family_yaml  # six members with web tokens
from tests.waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # two halo serve processes

LEASE = 2.0  # storage.lease_seconds: short, so the failover is seconds
# a liveness bound, not the speed goal: bench/cluster.py measures failover against the issue's
# lease_seconds + 5 s, where a busy machine cannot turn a slow run into a red test
SURVIVOR_WITHIN = 60.0


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    """Echoes the newest message: a reply names the message it answers."""

    def echo(body: dict[str, object]) -> Reply:
        users = [m for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]  # type: ignore[union-attr]
        return Reply(text=f"re: {users[-1]['content']}" if users else "hello", delay=0.02)

    fake = FakeOpenAI(responder=echo).start_in_thread()
    yield fake
    fake.stop()


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as url:
        yield url


def node(home: Path, fake: FakeOpenAI, url: str) -> Serve:
    home.mkdir()
    (home / "halo.yaml").write_text(family_yaml(fake))
    return Serve(
        home,
        {
            "HALO_STORAGE__URL": url,
            "HALO_STORAGE__LEASE_SECONDS": str(LEASE),
            "HALO_MEMORY__SEMANTIC__EMBEDDER": "none",
        },
    )


async def chat(http: aiohttp.ClientSession, serve: Serve, scope: int, text: str) -> str | None:
    """The reply, or None when the process did not answer (killed, refused)."""
    try:
        async with http.post(
            f"{serve.url}/api/chat", json={"text": text}, headers={"Authorization": f"Bearer token-{scope}"}
        ) as r:
            if r.status != 200:
                print(f"{serve.url} answered {r.status}: {await r.text()}")
                return None
            return str((await r.json())["reply"])
    except (TimeoutError, aiohttp.ClientError) as exc:
        print(f"{serve.url}: {exc!r}")
        return None


async def processes(http: aiohttp.ClientSession, serve: Serve) -> list[dict[str, object]]:
    async with http.get(f"{serve.url}/status", headers={"Authorization": "Bearer token-0"}) as r:
        assert r.status == 200, await r.text()
        found: list[dict[str, object]] = (await r.json())["processes"]
        return found


async def _up(http: aiohttp.ClientSession, serve: Serve) -> bool:
    try:
        async with http.get(
            f"{serve.url}/status", headers={"Authorization": "Bearer token-0"}, timeout=aiohttp.ClientTimeout(total=5)
        ) as r:
            return r.status == 200
    except (TimeoutError, aiohttp.ClientError):
        return False


async def _only_survivor(http: aiohttp.ClientSession, survivor: Serve) -> list[dict[str, object]] | None:
    """/status lists the survivor alone, as the leader (the singletons moved), else None."""
    seen = await processes(http, survivor)
    return seen if [(p["this"], p["leader"]) for p in seen] == [(True, True)] else None


async def test_two_processes_share_the_scopes_and_one_takes_over_when_the_other_is_killed(
    tmp_path: Path, model: FakeOpenAI, database: str
) -> None:
    a, b = node(tmp_path / "a", model, database), node(tmp_path / "b", model, database)
    answered: dict[str, str] = {}  # message → the reply its client got

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        await asyncio.gather(a.start(http), b.start(http))
        for serve in (a, b):  # /healthz answers while halo loads; /status once it is up
            await eventually(lambda serve=serve: _up(http, serve), within=180, what=f"halo up at {serve.url}")

        # each scope starts on one process, then talks through the other as well: handed over
        for scope in range(SCOPES):
            first, other = (a, b) if scope % 2 == 0 else (b, a)
            for serve, n in ((first, 0), (other, 1), (first, 2)):
                text = f"scope {scope} warm-up {n}"
                assert await chat(http, serve, scope, text) == f"re: {text}"
                answered[text] = f"re: {text}"
        seen = await processes(http, a)
        assert len(seen) == 2 and sum(int(str(p["scopes_held"])) for p in seen) == SCOPES
        assert sorted(int(str(p["scopes_held"])) for p in seen) == [SCOPES // 2, SCOPES // 2]
        assert sum(bool(p["leader"]) for p in seen) == 1
        leader = next(str(p["address"]) for p in seen if p["leader"])
        doomed, survivor = (a, b) if leader.endswith(f":{a.port}") else (b, a)  # the leader is killed

        # every scope talks through both processes at once; then a is killed mid-conversation
        killed = asyncio.Event()
        killed_at = 0.0
        after_kill: dict[int, list[float]] = {scope: [] for scope in range(SCOPES)}  # answer times after the kill
        lost_after_kill: list[str] = []
        acked_before_kill: dict[int, list[str]] = {scope: [] for scope in range(SCOPES)}
        first_after_kill: dict[int, str] = {}  # each scope's first message the survivor answered

        async def talk(scope: int) -> None:
            for n in range(1000):  # bounded; each scope stops once it was answered twice after the kill
                serve = survivor if killed.is_set() or n % 2 else doomed
                text = f"scope {scope} message {n}"
                reply = await chat(http, serve, scope, text)
                if reply is not None:
                    assert reply == f"re: {text}", f"{text} got someone else's reply: {reply}"
                    answered[text] = reply
                    if killed.is_set():
                        after_kill[scope].append(time.monotonic() - killed_at)
                        first_after_kill.setdefault(scope, text)
                    else:
                        acked_before_kill[scope].append(text)
                elif killed.is_set() and serve is survivor:
                    lost_after_kill.append(text)
                if len(after_kill[scope]) >= 2:
                    return

        talkers = [asyncio.create_task(talk(scope)) for scope in range(SCOPES)]
        await eventually(lambda: len(answered) >= SCOPES * 3 + SCOPES * 4, what="every scope talking")
        killed_at = time.monotonic()
        await doomed.kill()
        killed.set()
        await asyncio.wait_for(asyncio.gather(*talkers), timeout=SURVIVOR_WITHIN)

        assert not lost_after_kill, f"the survivor failed messages: {lost_after_kill}"
        slowest = max(times[0] for times in after_kill.values())
        print(f"\nfailover: every scope answered by the survivor within {slowest:.2f}s of kill -9")
        # the history moved with each scope: the survivor's first model request there carries
        # the last message acknowledged before the kill, whichever process had answered it
        for scope in range(SCOPES):
            history = next(
                [m["content"] for m in r.json["messages"] if m["role"] == "user"]
                for r in model.model_requests
                if [m for m in r.json["messages"] if m["role"] == "user"][-1]["content"] == first_after_kill[scope]
            )
            assert acked_before_kill[scope][-1] in history, f"web:m{scope} forgot {acked_before_kill[scope][-1]}"
        seen = await eventually(lambda: _only_survivor(http, survivor), within=SURVIVOR_WITHIN, what="the leader lease")
        assert int(str(seen[0]["scopes_held"])) == SCOPES
        assert survivor.proc is not None
        survivor.proc.send_signal(signal.SIGTERM)  # a clean stop: its batch of reply rows is written
        await asyncio.wait_for(survivor.proc.wait(), timeout=30)

    # none answered twice: one reply row per message in the shared outbox, and nothing of a
    # reply strayed into a web inbox (where a reply nobody waited for would land)
    admin = await asyncpg.connect(database.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        replies = await admin.fetch("SELECT in_reply_to_envelope, text FROM outbox WHERE kind = 'reply'")
        inbox = await admin.fetch("SELECT text FROM web_inbox")
    finally:
        await admin.close()
    envelopes = [r["in_reply_to_envelope"] for r in replies]
    assert len(envelopes) == len(set(envelopes)), "a message was answered twice"
    assert [r["text"] for r in inbox] == []
    texts = [r["text"] for r in replies]
    assert len(texts) == len(set(texts))
