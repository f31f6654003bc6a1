"""A turn's history is the transcript (issue 11): the gateway sends the model the scope's items
plus the message, and writes what the run produced (tool calls and their outputs) itself, in
one append. The real Agents SDK against the scripted model; assertions on what the model was
sent next and on the lines on disk."""

from __future__ import annotations

from typing import Any

from halo.pipeline.turn_agents import NOTE_HEADER
from tests.conftest import OWNER_TOKEN, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from transcripts.lines import ModelItem


def lines(halo: Any, scope_id: str) -> list[Any]:
    return [line for _, line in halo.transcripts.read_from(scope_id)]


def sent(fake: FakeOpenAI) -> list[dict[str, Any]]:
    """The messages of the newest model request, as the model got them, without halo's note for
    the turn (the time, recall: tests/test_prompt_cache.py), which is never history."""
    messages = fake.model_requests[-1].json["messages"]
    return [m for m in messages if not str(m.get("content") or "").startswith(NOTE_HEADER)]


def tool_steps(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    steps = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            steps.append(("call", call["function"]["name"]))
        if m["role"] == "tool":
            steps.append(("output", m["tool_call_id"]))
    return steps


async def test_a_turns_tool_step_is_in_the_next_turns_history_once(
    fake_llm: FakeOpenAI, settings_for, serve_halo
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.tool_call("current_time", {})
    fake_llm.reply("It is morning.")
    _, first = await running.chat("What time is it?", token=OWNER_TOKEN)
    fake_llm.reply("You asked about the time.")
    _, second = await running.chat("What did I ask?", token=OWNER_TOKEN)

    assert (first["reply"], second["reply"]) == ("It is morning.", "You asked about the time.")
    history = sent(fake_llm)
    said = [(m["role"], m.get("content")) for m in history if m["role"] in ("user", "assistant") and m.get("content")]
    assert said == [
        ("user", "What time is it?"),
        ("assistant", "It is morning."),  # the reply line stands for the model's message: once
        ("user", "What did I ask?"),
    ]
    assert [kind for kind, _ in tool_steps(history)] == ["call", "output"]
    on_disk = lines(running.halo, "web:wags")
    items = [line.item["type"] for line in on_disk if isinstance(line, ModelItem)]
    assert items == ["function_call", "function_call_output"]
    assert [line.role for line in on_disk] == ["user", "event", "event", "assistant", "user", "assistant"]


async def test_a_run_that_fails_after_a_tool_ran_keeps_the_finished_step(
    fake_llm: FakeOpenAI, settings_for, serve_halo
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm, max_retries=0)))
    fake_llm.tool_call("current_time", {})
    fake_llm.error(500)  # the model call after the tool ran fails
    _, failed = await running.chat("What time is it?", token=OWNER_TOKEN)
    fake_llm.reply("Sorry about that: it is morning.")
    _, again = await running.chat("Hello?", token=OWNER_TOKEN)

    assert "can't reach my language model" in failed["reply"]
    assert again["reply"] == "Sorry about that: it is morning."
    history = sent(fake_llm)
    assert [kind for kind, _ in tool_steps(history)] == ["call", "output"]  # what was done is remembered
    assert [m["content"] for m in history if m["role"] == "user"] == ["What time is it?", "Hello?"]
