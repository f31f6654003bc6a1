"""Bounded tool loops (issue 16): a message may take at most llm.max_model_turns model calls
and llm.max_tool_calls tool calls, the same call is never run twice, and the person is told
when a cap cut the work short. The real Agents SDK against the scripted model."""

from __future__ import annotations

import dataclasses

import pytest

from halo.core.turn import Turn
from halo.runtime.app import build_halo
from tests.audit_support import audit_events
from tests.conftest import OWNER_TOKEN, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.test_routing import envelope


def capped(fake: FakeOpenAI, turns: int, tools: int) -> str:
    return llm_yaml(fake) + f"  max_model_turns: {turns}\n  max_tool_calls: {tools}\n"


def tool_outputs(fake: FakeOpenAI) -> list[str]:
    """What each tool call answered, as the model was sent it (the last request holds them all)."""
    messages = fake.model_requests[-1].json["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


async def test_a_model_that_keeps_calling_tools_is_stopped_and_the_person_told(
    fake_llm: FakeOpenAI, settings_for, serve_halo
) -> None:
    running = await serve_halo(settings_for(capped(fake_llm, turns=4, tools=12)))
    for n in range(10):  # a model stuck in a loop: a new question for the index every time
        fake_llm.tool_call("recall", {"query": f"trip {n}"})

    status, body = await running.chat("When is the school trip?", token=OWNER_TOKEN)

    assert status == 200
    assert "I stopped after 4 steps without finishing" in body["reply"]
    assert len([r for r in fake_llm.model_requests if not r.intercepted]) == 4  # not one more model call
    assert fake_llm.pending_replies == 6


async def test_the_same_call_twice_and_calls_over_the_budget_are_not_run(
    fake_llm: FakeOpenAI, settings_for, serve_halo
) -> None:
    running = await serve_halo(settings_for(capped(fake_llm, turns=8, tools=2)))
    fake_llm.tool_call("recall", {"query": "trip"})
    fake_llm.tool_call("recall", {"query": "trip"})  # again, word for word
    fake_llm.tool_call("recall", {"query": "museum"})
    fake_llm.tool_call("recall", {"query": "bus"})  # the third distinct call: over a budget of 2
    fake_llm.reply("The trip is on Friday.")

    status, body = await running.chat("When is the school trip?", token=OWNER_TOKEN)

    assert status == 200
    assert body["reply"].startswith("The trip is on Friday.")
    assert "(I stopped looking things up early: the limit of 2 tool calls" in body["reply"]
    outputs = tool_outputs(fake_llm)
    assert len(outputs) == 4
    assert "already called this tool with exactly these arguments" in outputs[1]
    assert "tool limit for this message is reached" in outputs[3]
    assert not any("already called" in o or "limit" in o for o in (outputs[0], outputs[2]))
    events = await audit_events(running.halo)
    assert any(e["kind"] == "turn_cut_short" for e in events)


async def test_the_budget_is_each_messages_own_and_a_turn_is_never_written_to(
    fake_llm: FakeOpenAI, settings_for, serve_halo
) -> None:
    running = await serve_halo(settings_for(capped(fake_llm, turns=8, tools=1)))
    fake_llm.tool_call("recall", {"query": "trip"})
    fake_llm.reply("Friday.")
    _, first = await running.chat("When is the school trip?", token=OWNER_TOKEN)
    fake_llm.tool_call("recall", {"query": "trip"})  # the same call, in the next message: it runs
    fake_llm.reply("Still Friday.")
    _, second = await running.chat("And the trip, again?", token=OWNER_TOKEN)

    assert (first["reply"], second["reply"]) == ("Friday.", "Still Friday.")  # nothing cut short
    assert not any("already called" in o or "limit" in o for o in tool_outputs(fake_llm))
    turn = Turn(envelope(running.halo, "mom", "hi"), running.halo.policy)
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.images = ()  # type: ignore[misc]  # a step that learns more makes the next turn


async def test_a_repeated_call_is_not_run_and_the_streamed_reply_says_why(fake_llm: FakeOpenAI, settings_for) -> None:
    """The run, not the turn, counts the calls: what it found reaches the reply the person sees,
    on the streamed path (a chat app showing the reply as it comes) as on the plain one."""
    halo = build_halo(settings_for(capped(fake_llm, turns=8, tools=12)))
    try:
        fake_llm.tool_call("recall", {"query": "trip"})
        fake_llm.tool_call("recall", {"query": "trip"})  # again, word for word
        fake_llm.reply("The trip is on Friday.")
        streamed: list[str] = []

        async def on_delta(text: str) -> None:
            streamed.append(text)

        reply = await halo.gateway.handle(envelope(halo, "wags", "When is the school trip?"), on_delta=on_delta)

        assert reply.text == (
            "The trip is on Friday.\n\n(I stopped looking things up early: recall was asked for the same thing twice.)"
        )
        assert "".join(streamed) == "The trip is on Friday."  # the note is added once the run is done
        outputs = tool_outputs(fake_llm)
        assert len(outputs) == 2 and "already called this tool with exactly these arguments" in outputs[1]
    finally:
        await halo.close()
