"""Provider outages become a clear reply, an audit event and a saved message — never a crash."""

from __future__ import annotations

import json

import pytest

from halo.pipeline.model_run import PROVIDER_DOWN
from tests.audit_support import audit_events
from tests.conftest import OWNER_AUTH, free_port, llm_yaml
from tests.fakes.llm_server import FakeOpenAI


def roles(halo, scope_id: str) -> list[str]:
    store = halo.transcripts
    return [line.role for _, line in store.read_from(scope_id)]


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_persistent_error_gives_the_clear_reply(status, fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm, max_retries=2)))
    for _ in range(3):
        fake_llm.error(status)

    code, body = await running.chat("Is it going to rain?", token="mom-token")

    assert (code, body["reply"]) == (200, PROVIDER_DOWN)
    assert len(fake_llm.model_requests) == 3  # one try and two bounded retries
    assert roles(running.halo, "web:mom") == ["user", "event"]  # the message is saved
    events = await running.halo.audit.tail(5, kind="provider_error")
    assert events and str(status) in events[-1]["error"]


async def test_a_passing_429_is_retried_and_answered_once(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm, max_retries=2)))
    fake_llm.error(429, retry_after=0.01)
    fake_llm.reply("Sunny all day.")
    _, body = await running.chat("Weather?", token="mom-token")
    assert body["reply"] == "Sunny all day."
    assert len(fake_llm.model_requests) == 2


async def test_connection_refused_gives_the_clear_reply(settings_for, serve_halo):
    dead = f"""\
llm:
  provider: openai-compatible
  base_url: http://127.0.0.1:{free_port()}/v1
  api_key: k
  max_retries: 1
  retry_backoff_seconds: 0.01
"""
    running = await serve_halo(settings_for(dead))
    code, body = await running.chat("hello", token="mom-token")
    assert (code, body["reply"]) == (200, PROVIDER_DOWN)
    assert roles(running.halo, "web:mom") == ["user", "event"]


async def test_unauthorised_key_gives_the_clear_reply_without_leaking_it(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.error(401, "Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz")
    _, body = await running.chat("hello", token="mom-token")
    assert body["reply"] == PROVIDER_DOWN
    log = json.dumps(await audit_events(running.halo))
    assert "sk-proj-abcdefghijklmnopqrstuvwxyz" not in log
    assert len(fake_llm.model_requests) == 1  # 401 is not retried


async def test_timeout_gives_the_clear_reply(fake_llm, settings_for, serve_halo):
    yaml = llm_yaml(fake_llm, max_retries=0).replace("timeout_seconds: 30", "timeout_seconds: 0.3")
    running = await serve_halo(settings_for(yaml))
    fake_llm.delay(3)
    _, body = await running.chat("hello", token="mom-token")
    assert body["reply"] == PROVIDER_DOWN


async def test_broken_stream_gives_the_clear_reply(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm, max_retries=0)))
    fake_llm.broken_stream()
    headers = {"Accept": "text/event-stream", "Authorization": "Bearer mom-token"}
    async with running.http.post(running.url("/api/chat"), json={"text": "tell me"}, headers=headers) as resp:
        raw = (await resp.read()).decode()
    assert "event: done" in raw
    assert PROVIDER_DOWN in raw


async def test_a_failing_model_is_a_problem_in_status_until_a_call_succeeds(
    fake_llm: FakeOpenAI, settings_for, serve_halo
):
    running = await serve_halo(settings_for(llm_yaml(fake_llm, max_retries=0)))

    async def model_problems() -> list[str]:
        async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
            body = await resp.json()
        return [p for p in body["problems"] if "language model" in p]

    assert await model_problems() == []
    fake_llm.error(500)
    _, body = await running.chat("Is it going to rain?", token="mom-token")
    assert body["reply"] == PROVIDER_DOWN
    [problem] = await model_problems()
    assert problem.startswith("The language model failed at ") and "500" in problem
    fake_llm.reply("Sunny all day.")
    _, body = await running.chat("And tomorrow?", token="mom-token")
    assert body["reply"] == "Sunny all day."
    assert await model_problems() == []
