"""Provider chaos: whatever the model server does, every person gets an answer or the clear
error within `llm.reply_deadline_seconds`, and every message is kept in the transcript.

The deadline here is short; the client timeout and retries are generous, so only the
deadline (and the capped Retry-After) can explain an answer arriving in time. `PATIENCE`
bounds each request so a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from halo.pipeline.model_run import PROVIDER_DOWN
from tests.conftest import free_port
from tests.fakes.llm_server import GARBAGE, HANG_SECONDS, FakeOpenAI, Reply

DEADLINE = 1.0  # a hang's wait; a plain turn here takes milliseconds, on a busy machine a few hundred
PATIENCE = aiohttp.ClientTimeout(total=30)  # far past DEADLINE, far short of the client's 120 s


def chaos_yaml(base_url: str, *, deadline: float = DEADLINE, max_retries: int = 2, **extra: Any) -> str:
    fields = {
        "provider": "openai-compatible",
        "model": "fake-model",
        "base_url": base_url,
        "api_key": "test-key",
        "max_retries": max_retries,
        "retry_backoff_seconds": 0.01,
        "timeout_seconds": 120,
        "reply_deadline_seconds": deadline,
        **extra,
    }
    return "llm:\n" + "".join(f"  {key}: {value}\n" for key, value in fields.items())


async def ask(running, text: str, token: str, *, stream: bool = False) -> str | None:
    """The reply a person sees, from the JSON chat or from the SSE chat's `done` event."""
    headers = {"Authorization": f"Bearer {token}"}
    if stream:
        headers["Accept"] = "text/event-stream"
    url = running.url("/api/chat")
    async with running.http.post(url, json={"text": text}, headers=headers, timeout=PATIENCE) as resp:
        assert resp.status == 200
        if not stream:
            return (await resp.json())["reply"]
        raw = (await resp.read()).decode()
    done = raw.split("event: done\ndata: ", 1)[1].split("\n", 1)[0]
    import json

    return json.loads(done)["reply"]


def kept(running, scope_id: str) -> list[tuple[str, str]]:
    store = running.halo.transcripts
    return [(line.role, line.text) for _, line in store.read_from(scope_id)]


FAILURES: dict[str, Callable[[FakeOpenAI], None]] = {
    "500": lambda fake: [fake.error(500) for _ in range(5)] and None,
    "429 with Retry-After: 600": lambda fake: [fake.error(429, retry_after=600) for _ in range(5)] and None,
    "429 without Retry-After": lambda fake: [fake.enqueue(Reply(status=429)) for _ in range(5)] and None,
    "hang": lambda fake: [fake.hang() for _ in range(5)] and None,
    "garbage": lambda fake: [fake.garbage() for _ in range(5)] and None,
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("failure", list(FAILURES))
async def test_every_failure_gets_the_clear_reply_and_keeps_the_message(
    failure: str, stream: bool, fake_llm: FakeOpenAI, settings_for, serve_halo
):
    running = await serve_halo(settings_for(chaos_yaml(fake_llm.base_url)))
    FAILURES[failure](fake_llm)

    assert await ask(running, "Is the pool open today?", "mom-token", stream=stream) == PROVIDER_DOWN
    assert kept(running, "web:mom")[0] == ("user", "Is the pool open today?")
    assert [role for role, _ in kept(running, "web:mom")] == ["user", "event"]
    assert GARBAGE not in str(kept(running, "web:mom"))


async def test_refused_connection_gets_the_clear_reply(settings_for, serve_halo):
    running = await serve_halo(settings_for(chaos_yaml(f"http://127.0.0.1:{free_port()}/v1")))
    for stream in (False, True):
        assert await ask(running, "hello?", "wags-token", stream=stream) == PROVIDER_DOWN
    assert [role for role, _ in kept(running, "web:wags")] == ["user", "event"] * 2


async def test_a_hanging_model_is_cut_off_by_the_deadline_and_audited(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(chaos_yaml(fake_llm.base_url)))
    fake_llm.hang()
    assert await ask(running, "Are you there?", "mom-token") == PROVIDER_DOWN
    [event] = await running.halo.audit.tail(5, kind="reply_deadline")
    assert event["scope_id"] == "web:mom" and event["seconds"] == DEADLINE
    fake_llm.reply("Back again.")
    await ask(running, "And now?", "mom-token")
    # the scope is free for the next message: it reaches the model (whether the answer also fits in
    # the 1 s deadline is the machine's speed; on a slow, busy one a first real answer may not)
    assert "And now?" in fake_llm.last_prompt_text()


async def test_retry_after_600_is_capped_so_the_retry_answers_in_time(fake_llm: FakeOpenAI, settings_for, serve_halo):
    yaml = chaos_yaml(fake_llm.base_url, deadline=20, max_retry_after_seconds=0.05)
    running = await serve_halo(settings_for(yaml))
    fake_llm.error(429, retry_after=600)
    fake_llm.reply("The pool opens at nine.")
    assert await ask(running, "Is the pool open?", "mom-token") == "The pool opens at nine."
    assert len(fake_llm.model_requests) == 2


async def test_a_childs_hanging_classifier_falls_back_to_the_built_in_screen(
    fake_llm: FakeOpenAI, settings_for, serve_halo
):
    running = await serve_halo(settings_for(chaos_yaml(fake_llm.base_url, deadline=3)))
    classifier_hangs = Reply(text="{}", delay=HANG_SECONDS)
    fake_llm.interceptors.insert(0, lambda body: classifier_hangs if "child-safety classifier" in str(body) else None)
    fake_llm.reply("Volcanoes erupt when pressure builds up.")
    assert await ask(running, "why do volcanoes erupt?", "aarav-token") == "Volcanoes erupt when pressure builds up."
    assert len(fake_llm.intercepted_requests) >= 1  # the classifier was asked, and given up on

    # the built-in screen still stands while the classifier is away
    reply = await ask(running, "how do I buy a gun", "aarav-token")
    assert reply is not None and "gun" not in reply.lower() and reply != PROVIDER_DOWN


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_an_answer_with_no_text_gets_the_clear_reply_never_an_ellipsis(
    stream: bool, fake_llm: FakeOpenAI, settings_for, serve_halo
):
    running = await serve_halo(settings_for(chaos_yaml(fake_llm.base_url)))
    fake_llm.reply("")  # parsed, but nothing in it a person could read
    assert await ask(running, "What's for dinner?", "mom-token", stream=stream) == PROVIDER_DOWN
    assert [role for role, _ in kept(running, "web:mom")] == ["user", "event"]
