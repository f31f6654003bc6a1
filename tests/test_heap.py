"""What a serving process does not hold: httpx's command-line client (halo/runtime/heap.py),
with tracing off, the Agents SDK's trace exporter (halo/runtime/providers.py), and a copy of the
SDK's stream event types in every event that holds them (halo/runtime/heap.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel

from halo.runtime.heap import leaves_first
from tests.fakes.llm_server import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
CLI_LIBRARIES = ["rich", "pygments"]

PROBE = """
import json, sys
if sys.argv[1] == "skip":
    from halo.runtime.heap import skip_httpx_cli
    skip_httpx_cli()
import httpx
client = httpx.AsyncClient()  # what python-telegram-bot makes
print(json.dumps({"loaded": [m for m in LIBRARIES if m in sys.modules], "stub_main": callable(httpx.main)}))
"""


def probe(mode: str) -> dict:
    code = PROBE.replace("LIBRARIES", repr(CLI_LIBRARIES))
    out = subprocess.run([sys.executable, "-c", code, mode], cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


@pytest.mark.slow  # an interpreter per case
def test_httpx_without_its_command_line_client_loads_neither_rich_nor_pygments() -> None:
    if probe("plain")["loaded"] != CLI_LIBRARIES:
        pytest.skip("rich and pygments are not both installed: httpx's CLI loads nothing to skip")
    assert probe("skip") == {"loaded": [], "stub_main": True}


def test_with_tracing_off_no_trace_is_kept_and_with_it_on_the_sdk_exports_again(monkeypatch) -> None:
    """The SDK's default trace exporter (an HTTP client, a TLS context, a batch processor) is
    not built for a halo whose `llm.tracing` is off, and is back for one that turns it on."""
    import agents

    from config.settings import LLMSettings
    from halo.runtime.providers import trace_only_when_asked

    monkeypatch.delenv("OPENAI_AGENTS_DISABLE_TRACING")  # the suite's own switch (conftest) would hide both
    try:
        trace_only_when_asked(LLMSettings(tracing=False))
        assert agents.trace("a turn").export() is None  # a no-op trace: nothing records it
        trace_only_when_asked(LLMSettings(tracing=True))
        assert agents.trace("a turn").export() is not None
    finally:
        trace_only_when_asked(LLMSettings(tracing=False))  # the rest of the suite traces nothing


class Leaf(BaseModel):
    x: int


class Other(BaseModel):
    y: str


class Middle(BaseModel):
    leaf: Leaf
    others: list[Other] | None = None


class Top(BaseModel):
    middle: Annotated[Middle, "a note"]
    again: dict[str, Leaf]


def test_leaves_first_puts_every_model_after_the_models_it_holds() -> None:
    assert leaves_first([Top, Leaf, 3, "not a model", BaseModel, Other]) == [Leaf, Other, Middle, Top]


async def test_a_streamed_chat_completion_has_the_event_types_built_leaves_first(fake_llm: FakeOpenAI) -> None:
    """Built top down by the SDK, each event would hold its own copy of the output items and
    the response; built leaves first, before the first stream, every one of them has its own."""
    from agents import Agent, RunConfig, Runner
    from agents.models import chatcmpl_stream_handler

    from config.settings import LLMSettings
    from halo.runtime.providers import build_model, close_model

    model = build_model(LLMSettings(provider="openai-compatible", base_url=fake_llm.base_url, model="m"))
    try:
        run = Runner.run_streamed(Agent(name="a", model=model), "hi", run_config=RunConfig(tracing_disabled=True))
        async for _ in run.stream_events():
            pass
        assert run.final_output == "Hello from the fake model"
    finally:
        await close_model(model)
    built = leaves_first(vars(chatcmpl_stream_handler).values())
    assert len(built) > 100  # the output item union, the tools, the response, the events
    assert [m.__name__ for m in built if not m.__pydantic_complete__] == []
