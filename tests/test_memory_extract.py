"""Model extraction against the fake OpenAI server: structured entries into MEMORY.md and the
sidecar, deduplicated, and a failing chunk retried warmer, kept, and never marked done."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from config.settings import LLMSettings
from halo.runtime.providers import build_model
from memory import facts
from memory.extraction import sidecar
from memory.extraction.extract import ModelChunkExtractor, ModelExtraction
from memory.markdown import section_body
from memory.store import memory_meta
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_support import MemoryKit, names

SCOPE = "web:mom"


def entry(content: str, evidence: str, kind: str = "preference", confidence: float = 0.9) -> dict:
    return {"type": kind, "content": content, "confidence": confidence, "evidence": evidence, "about": "Mom"}


def answer(*entries: dict) -> str:
    return json.dumps({"entries": list(entries)})


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def extraction(kit: MemoryKit, fake: FakeOpenAI, **kwargs: object) -> ModelExtraction:
    llm = LLMSettings(
        provider="openai-compatible",
        model="main-model",
        cheap_model="cheap-model",
        base_url=fake.base_url,
        api_key="test-key",
    )  # type: ignore[arg-type]
    model = build_model(llm, llm.cheap_model)
    assert model is not None
    return ModelExtraction(
        kit.files,
        kit.transcripts,
        kit.state,
        ModelChunkExtractor(model),
        names=names,
        may_write=kit.may_write,
        model_name="cheap-model",
        clock=kit.clock,
        **kwargs,  # type: ignore[arg-type]
    )


def learned(kit: MemoryKit) -> list[str]:
    return (section_body(kit.memory(SCOPE), facts.LEARNED) or "").split("\n")


async def test_entries_are_extracted_rendered_and_their_metadata_kept(tmp_path: Path, fake: FakeOpenAI) -> None:
    kit = MemoryKit(tmp_path / "home")
    await kit.exchange(SCOPE, "hi", "Hello!")
    await kit.exchange(SCOPE, "I really prefer tea over coffee in the evenings", "Noted.")
    await kit.exchange(SCOPE, "ok", "👍")
    await kit.exchange(SCOPE, "Let's go with the blue tent for the camping trip", "Good choice.")
    fake.reply(
        answer(
            entry("Mom prefers tea over coffee in the evenings", "I really prefer tea over coffee"),
            entry("Mom chose the blue tent for the camping trip", "go with the blue tent", "decision", 0.8),
            entry("Mom owns a yacht", "I bought a yacht last week", "fact"),  # not in the chat: made up
            entry("Mom might like jazz", "prefer tea", "preference", 0.1),  # too unsure
        )
    )

    result = await extraction(kit, fake).run(SCOPE)

    assert (result.chunks, result.failed_chunks, result.added) == (1, 0, 2)
    request = fake.chat_requests[-1].json
    assert request["model"] == "cheap-model"
    assert request["response_format"]["type"] == "json_schema"
    prompt = fake.prompt_text(fake.chat_requests[-1])
    assert "I really prefer tea" in prompt and "blue tent" in prompt
    assert "hi\n" not in prompt and "] Mom: ok" not in prompt  # greetings and confirmations dropped
    day = learned(kit)[0].rsplit(", ", 1)[1][:10]
    assert learned(kit) == [
        f"- Mom prefers tea over coffee in the evenings _(preference, 0.90, {day})_",
        f"- Mom chose the blue tent for the camping trip _(decision, 0.80, {day})_",
    ]
    meta = sidecar.load(kit.files.store, memory_meta(SCOPE))
    assert [(e.type, e.evidence, e.model) for e in meta] == [
        ("preference", "I really prefer tea over coffee", "cheap-model"),
        ("decision", "go with the blue tent", "cheap-model"),
    ]
    assert all(e.source[0] == 0 and e.source[1] > 0 for e in meta)
    state = kit.state.get(SCOPE, "extract")
    assert state.offset == kit.transcripts.size(SCOPE) and state.pending == []

    # said again in other words: a duplicate by token overlap, not a new line
    await kit.exchange(SCOPE, "Honestly I prefer tea over coffee in the evening", "Sure.")
    fake.reply(answer(entry("Mom prefers tea over coffee in the evening", "I prefer tea over coffee")))
    again = await extraction(kit, fake).run(SCOPE)
    assert (again.added, again.duplicates) == (0, 1)
    assert len(learned(kit)) == 2


async def test_a_line_deleted_by_a_parent_is_not_learned_again(tmp_path: Path, fake: FakeOpenAI) -> None:
    kit = MemoryKit(tmp_path / "home")
    await kit.exchange(SCOPE, "I really hate olives on pizza, always have", "Noted.")
    fake.reply(answer(entry("Mom hates olives on pizza", "I really hate olives on pizza")))
    await extraction(kit, fake).run(SCOPE)
    path = kit.paths.memory_file(SCOPE)
    path.write_text("\n".join(line for line in path.read_text().split("\n") if "olives" not in line))

    await kit.exchange(SCOPE, "Seriously, I hate olives on my pizza", "Got it.")
    fake.reply(answer(entry("Mom hates olives on pizza", "I hate olives on my pizza")))
    result = await extraction(kit, fake).run(SCOPE)

    assert result.added == 0 and "olives" not in path.read_text()
    [kept] = sidecar.load(kit.files.store, memory_meta(SCOPE))
    assert kept.removed_at is not None  # its metadata is kept, marked removed


async def test_a_failing_chunk_is_retried_warmer_kept_and_not_marked_done(tmp_path: Path, fake: FakeOpenAI) -> None:
    kit = MemoryKit(tmp_path / "home")
    turns = [
        "I really prefer window seats on flights",
        "We always take our shoes off at home",
        "Let's go with the Tuesday swimming class for Tara",
        "I love the blue mugs from the market",
    ]
    for text in turns:
        await kit.exchange(SCOPE, text, "Okay.")
    job = extraction(kit, fake, chunk_turns=2, overlap_turns=1)
    fake.reply(answer(entry("Mom prefers window seats on flights", "I really prefer window seats")))
    fake.error(500, "the model crashed")
    fake.reply("this is not JSON")
    fake.reply('{"entries": [{"type": "nonsense"}]}')

    result = await job.run(SCOPE)

    assert (result.chunks, result.failed_chunks, result.added) == (2, 1, 1)
    temperatures = [r.json.get("temperature") for r in fake.chat_requests]
    assert temperatures == [0.0, 0.0, 0.3, 0.7]  # chunk 1 once; chunk 2 three times, warmer each time
    second_prompt = fake.prompt_text(fake.chat_requests[1])
    assert "shoes off at home (context)" in second_prompt  # the overlap turn, marked as context
    state = kit.state.get(SCOPE, "extract")
    size = kit.transcripts.size(SCOPE)
    [[start, end]] = state.pending
    assert 0 < start < end == size and state.offset == size
    assert state.failures == 1 and "1 chunk(s) failed" in (state.last_error or "")
    assert [line for line in learned(kit) if "swimming" in line] == []

    # the next run retries only the kept range, and only now is it done
    fake.reply(answer(entry("Tara goes to the Tuesday swimming class", "Tuesday swimming class for Tara", "decision")))
    retry = await job.run(SCOPE)

    assert (retry.chunks, retry.failed_chunks, retry.added) == (1, 0, 1)
    retry_prompt = fake.prompt_text(fake.chat_requests[-1])
    assert "window seats" not in retry_prompt and "Tuesday swimming" in retry_prompt
    state = kit.state.get(SCOPE, "extract")
    assert (state.pending, state.failures, state.last_error) == ([], 0, None)
    assert any("Tuesday swimming" in line for line in learned(kit))
