"""Each configured provider, end to end through halo's web chat, against its local fake API."""

from __future__ import annotations

import pytest

from config.settings import LLMSettings
from halo.pipeline.model_run import PROVIDER_DOWN
from halo.runtime.providers import ProviderConfigError, build_model
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.llm_server import FakeOpenAI


async def test_openai_provider_uses_the_responses_api(settings_for, serve_halo):
    async with FakeOpenAI() as fake:
        yaml = f"llm: {{provider: openai, model: gpt-test, base_url: {fake.base_url}, api_key: sk-test}}\n"
        running = await serve_halo(settings_for(yaml))
        fake.reply("Responses API says hi.")
        status, body = await running.chat("hello", token="mom-token")
        assert (status, body["reply"]) == (200, "Responses API says hi.")
        assert len(fake.responses_requests) == 1 and not fake.chat_requests
        assert fake.responses_requests[0].json["model"] == "gpt-test"
        assert "Mom" in fake.last_prompt_text()


async def test_anthropic_provider_through_the_official_sdk(settings_for, serve_halo):
    async with FakeAnthropic() as fake:
        yaml = (
            f"llm: {{provider: anthropic, model: claude-test, base_url: '{fake.base_url}', api_key: k,"
            " max_retries: 0}\n"
        )
        running = await serve_halo(settings_for(yaml))
        fake.reply("Claude says hi.")
        status, body = await running.chat("hello", token="mom-token")
        assert (status, body["reply"]) == (200, "Claude says hi.")
        request = fake.messages_requests[0]
        assert request.json["model"] == "claude-test"
        assert request.json["max_tokens"] == 2048  # Anthropic requires a cap; halo always sends one
        assert "hello" in fake.last_prompt_text() and "Mom" in fake.last_prompt_text()


async def test_anthropic_overload_gives_the_clear_reply(settings_for, serve_halo):
    async with FakeAnthropic() as fake:
        yaml = (
            f"llm: {{provider: anthropic, model: claude-test, base_url: '{fake.base_url}', api_key: k,"
            " max_retries: 0}\n"
        )
        running = await serve_halo(settings_for(yaml))
        for _ in range(4):  # the anthropic client inside any-llm retries on its own too
            fake.error(529)
        _, body = await running.chat("hello", token="mom-token")
        assert body["reply"] == PROVIDER_DOWN


async def test_a_tool_call_runs_through_the_policy_checked_tool(fake_llm: FakeOpenAI, settings_for, serve_halo):
    from tests.conftest import llm_yaml

    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.tool_call("current_time", {})
    fake_llm.reply("It is tea time.")
    _, body = await running.chat("what time is it?", token="mom-token")
    assert body["reply"] == "It is tea time."
    tool_outputs = [m for m in fake_llm.chat_requests[-1].json["messages"] if m.get("role") == "tool"]
    assert tool_outputs and "Not allowed" not in tool_outputs[0]["content"]
    events = await running.halo.audit.tail(20, kind="policy")
    assert any(e["action"] == "use_tool" and e["allowed"] for e in events)


@pytest.mark.parametrize(
    ("llm", "message"),
    [
        (LLMSettings(provider="openai-compatible"), "base_url"),
        (LLMSettings(provider="anthropic"), "ANTHROPIC_API_KEY"),
    ],
)
def test_misconfigured_provider_says_what_to_set(llm: LLMSettings, message: str, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderConfigError, match=message):
        build_model(llm)
