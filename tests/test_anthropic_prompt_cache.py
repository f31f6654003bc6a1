"""Anthropic's prompt cache through the real pipeline: halo marks a cache breakpoint at the end
of its stable prefix (tool schemas, then the instructions), the prefix is the same bytes turn
after turn, and what the stand-in Anthropic API reports as read from its cache is what halo's
usage table records and prices at the cached rate."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from config.settings import Settings
from halo.runtime.anthropic_cache import mark_stable_prefix
from halo.usage.prices import Prices
from halo.usage.report import usage_report
from halo.usage.store import UsageStore
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.llm_server import count_tokens
from tests.test_prompt_cache import mom_says

MODEL = "claude-sonnet-4-5"  # halo's default price: $3 input, $0.30 cached input, $15 output per million


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(default_reply="Saturday at ten, at the school field.") as fake:
        # the stand-in counts a token a word: the test family's ~680-word prefix (tool schemas in
        # JSON, the persona) is well over Anthropic's 1024-token minimum in real tokens
        fake.cache_min_tokens = 500
        yield fake


@pytest.fixture
async def halo(anthropic: FakeAnthropic, settings_for: Callable[..., Settings]) -> AsyncIterator[Any]:
    from halo.runtime.app import build_halo

    yaml = (
        f"llm: {{provider: anthropic, model: {MODEL}, base_url: '{anthropic.base_url}', api_key: k, max_retries: 0}}\n"
    )
    running = build_halo(settings_for(yaml))
    yield running
    await running.close()


def prefix_tokens(request: dict[str, Any]) -> int:
    """The tokens of the tool schemas and the system prompt, as the stand-in counts them."""
    tools = sum(count_tokens(json.dumps(tool)) for tool in request["tools"])
    return tools + sum(count_tokens(block["text"]) for block in request["system"])


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_the_breakpoint_ends_the_stable_prefix_and_the_cached_reads_are_recorded_and_priced(
    halo: Any, anthropic: FakeAnthropic, streamed: bool
) -> None:
    shown: list[str] = []

    async def show(piece: str) -> None:
        shown.append(piece)

    first = datetime(2025, 3, 3, 8, 15, tzinfo=UTC)
    on_delta = show if streamed else None
    await halo.gateway.handle(mom_says(halo, "When is soccer practice?", first), on_delta=on_delta)
    await halo.gateway.handle(mom_says(halo, "And swimming?", first + timedelta(minutes=47)), on_delta=on_delta)
    await halo.gateway.drain()
    one, two = (r.json for r in anthropic.messages_requests)
    assert all(bool(r.get("stream")) is streamed for r in (one, two)) and bool(shown) is streamed

    # the breakpoint: on the system prompt's last block, and nowhere else (not in the messages,
    # where the time and recall change every turn)
    for request in (one, two):
        *_, last = request["system"]
        assert last["cache_control"] == {"type": "ephemeral"} and "## Persona" in last["text"]
        assert json.dumps(request).count("cache_control") == 1
        assert request["tools"], "the turn offers tools: they are the start of the cached prefix"
    # the prefix (tools, then system) is the same bytes on both turns; the time is not in it
    assert json.dumps(one["tools"]) == json.dumps(two["tools"])
    assert json.dumps(one["system"]) == json.dumps(two["system"])
    assert "08:15" not in json.dumps(one["system"]) and "08:15" in json.dumps(one["messages"])
    assert "When is soccer practice?" in json.dumps(two["messages"])  # the history follows the prefix

    # the stand-in wrote the prefix to its cache on turn 1 and read it on turn 2
    prefix = prefix_tokens(one)
    assert prefix >= anthropic.cache_min_tokens
    said_one, said_two = anthropic.reported_usage
    assert (said_one["cache_read_input_tokens"], said_one["cache_creation_input_tokens"]) == (0, prefix)
    assert (said_two["cache_read_input_tokens"], said_two["cache_creation_input_tokens"]) == (prefix, 0)

    # halo's usage row holds exactly what was reported: every input token, the reads as cached
    rows = await halo.usage.store.totals("2000-01-01", "2999-12-31", "purpose")
    [reply] = [row for row in rows if row.key == "reply"]
    inputs = [
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in (said_one, said_two)
    ]
    assert (reply.calls, reply.input_tokens, reply.cached_tokens) == (2, sum(inputs), prefix)
    assert reply.output_tokens == said_one["output_tokens"] + said_two["output_tokens"]
    # priced: the reads at the cached rate, the rest (the first turn's cache write too) at the input rate
    expected = ((sum(inputs) - prefix) * 3.00 + prefix * 0.30 + reply.output_tokens * 15.00) / 1_000_000
    report = await usage_report(UsageStore(halo.db), Prices(), "2000-01-01", "2999-12-31", "purpose")
    [priced] = [row for row in report["rows"] if row["key"] == "reply"]
    assert priced["usd"] == round(expected, 6) and priced["cachedTokens"] == prefix  # the report rounds to 6 places


def test_the_breakpoint_goes_on_the_last_tool_when_there_is_no_system_prompt() -> None:
    request = mark_stable_prefix({"tools": [{"name": "a"}, {"name": "b"}], "messages": []})
    assert request["tools"] == [{"name": "a"}, {"name": "b", "cache_control": {"type": "ephemeral"}}]
    blocks = mark_stable_prefix({"system": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]})
    assert blocks["system"][-1]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in blocks["system"][0]
