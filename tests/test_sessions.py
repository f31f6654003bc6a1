"""The model's session read from the transcript: budget, restart, tool items, markers, compaction."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from openai import AsyncOpenAI

from halo.pipeline.compaction import compact_if_needed
from tests.fakes.llm_server import FakeOpenAI
from transcripts import TranscriptLine, TranscriptStore
from transcripts.lines import Message, Note, Reply
from transcripts.session import SUMMARY_PREFIX, TranscriptSessions
from transcripts.tokens import estimate_tokens, fit_to_budget

KINDS: dict[str, type[TranscriptLine]] = {"user": Message, "assistant": Reply, "event": Note}
SCOPE = "web:mom"
TOOL_STEP = [  # one finished tool call, as a run's items
    {"type": "function_call", "call_id": "c1", "name": "current_time", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "09:00"},
]


def turn(i: int, words: int = 40) -> list[dict]:
    return [
        {"role": "user", "content": f"question {i} " + "word " * words},
        {"role": "assistant", "content": f"answer {i} " + "word " * words},
    ]


def line(role: str, text: str, scope: str = SCOPE, **extra: object) -> TranscriptLine:
    return KINDS[role](
        id=f"{role}-{text[:12]}-{datetime.now(UTC).timestamp()}",
        ts=datetime.now(UTC),
        scope_id=scope,
        text=text,
        speaker="mom" if role == "user" else "halo",
        platform="web",
        **extra,
    )


async def said(store: TranscriptStore, *pairs: tuple[str, str]) -> None:
    for question, answer in pairs:
        await store.append(line("user", question))
        await store.append(line("assistant", answer, reply="model"))


def on_disk(store: TranscriptStore, scope: str = SCOPE) -> list[dict]:
    return [json.loads(raw) for raw in store.path(scope).read_bytes().splitlines()]


def restarted(tmp_path: Path, budget: int = 4000) -> TranscriptSessions:
    """A fresh process's view: a new store and sessions over the same files."""
    return TranscriptSessions(TranscriptStore(tmp_path / "t"), budget)


def test_fit_to_budget_keeps_newest_whole_turns():
    items = [item for i in range(10) for item in turn(i)]
    kept = fit_to_budget(items, 200)
    assert kept and kept[-1] == items[-1]
    assert kept[0]["role"] == "user"  # starts on a turn boundary
    assert sum(estimate_tokens(i) for i in kept) <= 200


def test_fit_to_budget_never_orphans_a_tool_output():
    items = [
        {"role": "user", "content": "x " * 300},
        {"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "y " * 30},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    kept = fit_to_budget(items, 60)
    assert kept == [{"role": "user", "content": "next"}]


async def test_the_session_is_the_transcript_after_a_restart(tmp_path: Path):
    store = TranscriptStore(tmp_path / "t")
    sessions = TranscriptSessions(store, 4000)
    await said(store, ("The car is blue.", "Noted."), ("And the bike?", "Red, you said."))
    expected = [
        {"role": "user", "content": "The car is blue."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "And the bike?"},
        {"role": "assistant", "content": "Red, you said."},
    ]
    assert await sessions.get(SCOPE).get_items() == expected
    assert await restarted(tmp_path).get(SCOPE).get_items() == expected
    assert await sessions.get(SCOPE).get_items(limit=2) == expected[2:]


async def test_history_is_budgeted_but_kept_in_full(tmp_path: Path):
    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), history_budget=300)
    session = sessions.get(SCOPE)
    for i in range(10):
        await session.add_items(turn(i))
    handed = await session.get_items()
    assert sum(estimate_tokens(i) for i in handed) <= 300 and handed[-1] == turn(9)[1]
    assert session.over_budget  # compaction will start the session again after this turn
    assert len(on_disk(sessions.transcripts)) == 20
    # read back only to twice the budget: enough to compact from, however old the transcript
    again = await restarted(tmp_path, 300).all_items(SCOPE)
    assert again[-1] == turn(9)[1] and 300 < sum(estimate_tokens(i) for i in again) <= 600 + 100


async def test_a_long_run_of_short_messages_is_capped_by_items_from_a_turns_start(tmp_path: Path):
    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), history_budget=4000, max_items=11)
    session = sessions.get(SCOPE)
    for i in range(30):  # 60 short items fit the token budget; the item cap sends the newest turns
        await session.add_items(turn(i))
    handed = await session.get_items()
    assert handed == [item for i in range(25, 30) for item in turn(i)]  # 10 items: the 11th would split a turn
    assert not session.over_budget  # within the token budget: no compaction for a trim
    assert len(await session.sessions.all_items(SCOPE)) == 60  # the history itself is whole


async def test_a_run_writes_the_message_once_and_its_tool_items_as_lines(tmp_path: Path, fake_llm: FakeOpenAI):
    """The gateway's order: the user's line first, then the run; the SDK's save of the input is
    recognised, tool items become lines, and the reply line stands for the model's message."""
    store = TranscriptStore(tmp_path / "t")
    sessions = TranscriptSessions(store, 4000)
    await said(store, ("Hi", "Hello Mom."))

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    fake_llm.tool_call("weather", {"city": "Oslo"}, call_id="call_1")
    fake_llm.reply("It is sunny in Oslo.")
    client = AsyncOpenAI(base_url=fake_llm.base_url, api_key="k", max_retries=0)
    agent = Agent(name="halo", model=OpenAIChatCompletionsModel(model="m", openai_client=client), tools=[weather])

    await store.append(line("user", "Weather in Oslo?"))
    result = await Runner.run(
        agent, "Weather in Oslo?", session=sessions.get(SCOPE), run_config=RunConfig(tracing_disabled=True)
    )
    await store.append(line("assistant", str(result.final_output), reply="model"))
    await sessions.settle(SCOPE)
    await client.close()

    first = fake_llm.model_requests[0].json["messages"]
    assert [m["content"] for m in first if m["role"] == "user"] == ["Hi", "Weather in Oslo?"]  # not twice
    lines = on_disk(store)
    assert [ln["text"] for ln in lines if ln["role"] == "user"] == ["Hi", "Weather in Oslo?"]
    kinds = [ln["item"]["type"] for ln in lines if ln.get("kind") == "session.item"]
    assert kinds == ["function_call", "function_call_output"]
    assert lines[-1]["role"] == "assistant" and lines[-1]["text"] == "It is sunny in Oslo."
    after = await restarted(tmp_path).all_items(SCOPE)
    assert after == await sessions.all_items(SCOPE)
    assert [i.get("type") or i["role"] for i in after] == [
        "user",
        "assistant",
        "user",
        "function_call",
        "function_call_output",
        "assistant",
    ]


async def test_clear_starts_again_and_keeps_the_transcript(tmp_path: Path):
    store = TranscriptStore(tmp_path / "t")
    sessions = TranscriptSessions(store, 4000)
    await said(store, ("The car is blue.", "Noted."))
    await sessions.clear(SCOPE)
    await said(store, ("What car?", "Which one?"))
    assert [i["content"] for i in await sessions.all_items(SCOPE)] == ["What car?", "Which one?"]
    assert [i["content"] for i in await restarted(tmp_path).all_items(SCOPE)] == ["What car?", "Which one?"]
    assert "The car is blue." in store.path(SCOPE).read_text()


async def test_commands_and_their_answers_stay_out_of_the_history(tmp_path: Path):
    store = TranscriptStore(tmp_path / "t")
    sessions = TranscriptSessions(store, 4000)
    await said(store, ("Hi", "Hello."))
    await store.append(line("user", "/whoami"))
    await store.append(line("assistant", "You are Mom.", reply="command"))
    await store.append(line("event", "a safety note"))  # events without a kind are not items
    expected = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    assert await sessions.all_items(SCOPE) == expected
    assert await restarted(tmp_path).all_items(SCOPE) == expected


async def test_a_group_message_is_shown_to_the_model_with_its_speaker(tmp_path: Path):
    store = TranscriptStore(tmp_path / "t")
    await store.append(line("user", "pizza tonight?", scope="telegram:-5", model_input="[Mom] pizza tonight?"))
    items = await TranscriptSessions(store, 4000).all_items("telegram:-5")
    assert items == [{"role": "user", "content": "[Mom] pizza tonight?"}]


async def test_another_writer_is_seen_on_the_next_read(tmp_path: Path):
    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), 4000)
    assert await sessions.all_items(SCOPE) == []
    await said(TranscriptStore(tmp_path / "t"), ("imported", "line"))  # e.g. a CLI import
    assert [i["content"] for i in await sessions.all_items(SCOPE)] == ["imported", "line"]


async def test_a_torn_last_line_is_skipped_and_repaired(tmp_path: Path):
    store = TranscriptStore(tmp_path / "t")
    await said(store, ("Hi", "Hello."))
    with store.path(SCOPE).open("ab") as f:
        f.write(b'{"id": "torn", "role": "us')  # a crash mid-write
    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), 4000)
    assert len(await sessions.all_items(SCOPE)) == 2
    await said(sessions.transcripts, ("Again", "Yes."))
    assert [i["content"] for i in await sessions.all_items(SCOPE)] == ["Hi", "Hello.", "Again", "Yes."]
    assert [i["content"] for i in await restarted(tmp_path).all_items(SCOPE)] == ["Hi", "Hello.", "Again", "Yes."]


async def test_pop_item_takes_the_last_item_back(tmp_path: Path):
    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), 4000)
    await sessions.get(SCOPE).add_items(turn(1))
    assert await sessions.get(SCOPE).pop_item() == turn(1)[1]
    assert await sessions.all_items(SCOPE) == turn(1)[:1]
    assert await restarted(tmp_path).all_items(SCOPE) == turn(1)[:1]


async def test_the_cache_holds_a_bounded_number_of_scopes(tmp_path: Path):
    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), 4000, cached_scopes=3)
    for n in range(10):
        await said(sessions.transcripts, (f"hi {n}", "hello"))
        await sessions.all_items(f"web:m{n}")
    assert len(sessions._cache) <= 3


async def test_compaction_summarises_older_items_with_the_model(tmp_path: Path, fake_llm: FakeOpenAI):
    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), history_budget=300)
    session = sessions.get(SCOPE)
    await session.get_items()  # a hot scope: held in memory from here on, every item
    for i in range(10):
        await session.add_items(turn(i))
    await session.get_items()  # the runner's read notices the overflow
    fake_llm.reply("Mom asked ten questions about words.")
    client = AsyncOpenAI(base_url=fake_llm.base_url, api_key="k", max_retries=0)
    model = OpenAIChatCompletionsModel(model="m", openai_client=client)

    assert await compact_if_needed(sessions, SCOPE, model, tracing=False)

    items = await sessions.all_items(SCOPE)
    assert items[0]["role"] == "system" and items[0]["content"].startswith(SUMMARY_PREFIX)
    assert "ten questions" in items[0]["content"]
    assert items[-1] == turn(9)[1] and "question 0" not in str(items[1:])
    assert sum(estimate_tokens(i) for i in items[1:]) <= 150
    assert "question 0" in fake_llm.last_prompt_text()  # the older part was what got summarised
    assert await restarted(tmp_path, 300).all_items(SCOPE) == items
    await client.close()


async def test_compacting_twice_keeps_only_the_newest_summary(tmp_path: Path):
    summaries = iter(["first summary", "second summary"])

    async def summarise(items: list) -> str:
        return next(summaries)

    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), history_budget=300)
    for i in range(10):
        await sessions.get(SCOPE).add_items(turn(i))
    assert await sessions.compact(SCOPE, summarise)
    for i in range(10, 14):
        await sessions.get(SCOPE).add_items(turn(i))
    assert await sessions.compact(SCOPE, summarise)
    items = await sessions.all_items(SCOPE)
    assert [i["content"].split("\n")[1] for i in items if i["role"] == "system"] == ["second summary"]
    assert items[-1] == turn(13)[1]
    assert await restarted(tmp_path, 300).all_items(SCOPE) == items


async def test_compaction_without_a_model_drops_oldest(tmp_path: Path):
    sessions = TranscriptSessions(TranscriptStore(tmp_path / "t"), history_budget=300)
    session = sessions.get(SCOPE)
    for i in range(10):
        await session.add_items(turn(i))
    await session.get_items()
    assert await compact_if_needed(sessions, SCOPE, None, tracing=False)
    items = await sessions.all_items(SCOPE)
    assert all(i["role"] != "system" for i in items)
    assert items[-1] == turn(9)[1] and "question 0" not in str(items)
    assert await restarted(tmp_path, 300).all_items(SCOPE) == items


async def test_a_tool_call_left_without_its_output_is_not_sent_to_the_model(tmp_path: Path):
    """A crash (or an old transcript) can leave a call without its output; the model's API
    refuses such a history, so the view leaves the call out, with the reasoning that led to it."""
    store = TranscriptStore(tmp_path / "t")
    sessions = TranscriptSessions(store, 4000)
    await store.append(line("user", "What time is it?"))
    done = TOOL_STEP
    cut_off = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c2", "name": "recall", "arguments": '{"query": "x"}'},
    ]
    await sessions.get(SCOPE).add_items(done + cut_off)  # type: ignore[arg-type]

    sent = await restarted(tmp_path).get(SCOPE).get_items()

    assert sent == [{"role": "user", "content": "What time is it?"}, *done]
    assert len(on_disk(store)) == 5  # the transcript keeps every line as it was written


async def test_a_runs_closing_message_is_held_for_the_reply_line(tmp_path: Path):
    """A whole run at once (`add_run`): the tool step is written, the model's closing message
    waits for the reply line that stands for it (so the history has it once)."""
    store = TranscriptStore(tmp_path / "t")
    sessions = TranscriptSessions(store, 4000)
    await store.append(line("user", "Time?"))
    step = TOOL_STEP
    closing = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Nine."}]}
    await sessions.add_run(SCOPE, [*step, closing])  # type: ignore[list-item]
    assert [r.get("kind") for r in on_disk(store)] == [None, "session.item", "session.item"]

    await store.append(line("assistant", "Nine.", reply="model"))
    await sessions.settle(SCOPE)

    assert await restarted(tmp_path).get(SCOPE).get_items() == [
        {"role": "user", "content": "Time?"},
        *step,
        {"role": "assistant", "content": "Nine."},
    ]
