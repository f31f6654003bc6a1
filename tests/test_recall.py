"""Recall in the message path: the context section, the `recall` tool, `/recall`, `/status` —
each searching only the scopes the policy lets this conversation read."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from config.settings import Settings
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from tests.conftest import OWNER_AUTH, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_files import write_memory
from tests.seeding import halo_stores, seed_memory_file
from tests.semantic_helpers import save_concept_model
from tests.waiting import eventually
from transcripts.lines import Message, Reply

DM = "web:mom"
PARENTS = "telegram:-1001234"
DENTIST = "I need to book the dentist for Aarav's cleaning, Dr. Patel has a slot on the 14th"
QUESTION = "what did I say about the dentist last month?"


def semantic_yaml(model: Path, **extra: object) -> str:
    options = "".join(f", {k}: {v}" for k, v in extra.items())
    return f"memory:\n  semantic: {{embedder: model2vec, model: '{model}'{options}}}\n"


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return save_concept_model(tmp_path / "concept-model", ["grandma", "december", "visits", "aarav", "slot"])


async def seed_dm_month_ago(settings: Settings) -> None:
    then = datetime.now(UTC) - timedelta(days=31)
    async with halo_stores(settings) as stores:  # where the halo built from `settings` reads them
        await stores.transcripts.append(Message("u1", then, DM, DENTIST, speaker="mom", platform="web"))
        await stores.transcripts.append(
            Reply("a1", then + timedelta(seconds=3), DM, "Noted: the dentist.", speaker="halo", platform="web")
        )
        await stores.sessions.clear(DM)  # /new since: the words are in the transcript, not the session
        stores.transcripts.close()
    parents_memory = settings.paths.scope_dir(PARENTS) / "MEMORY.md"
    await seed_memory_file(settings, parents_memory, "# Parents\nGrandma visits in December.\n")


def in_parents_group(running, text: str) -> Envelope:
    family = running.halo.family
    mom = family.member("mom")
    return Envelope("telegram", resolve_scope(family, PARENTS), Speaker("1002", member=mom), text)


async def test_a_dm_recalls_its_own_words_and_the_parents_group_does_not(
    fake_llm: FakeOpenAI, settings_for, serve_halo, model_dir: Path
) -> None:
    settings = settings_for(llm_yaml(fake_llm) + semantic_yaml(model_dir))
    await seed_dm_month_ago(settings)
    running = await serve_halo(settings)
    semantic = running.halo.semantic
    await semantic.sync_all([DM, PARENTS])

    fake_llm.reply("You wanted to book the dentist for Aarav.")
    status, body = await running.chat(QUESTION, token="mom-token")
    assert status == 200 and body["scope_id"] == DM
    prompt = fake_llm.last_prompt_text()
    assert "Recalled from memory" in prompt
    assert "Dr. Patel has a slot on the 14th" in prompt, "the DM's own words are recalled through the index"
    assert "[this chat · transcript lines 1–2" in prompt, "labelled with their source"
    history = await running.halo.sessions.get(DM).get_items()
    assert not any("Dr. Patel" in str(item) for item in history), "before the last /new: in the transcript only"

    fake_llm.reply("I don't know.")
    reply = await running.halo.gateway.handle(in_parents_group(running, QUESTION))
    assert reply.kind == "model"
    group_prompt = fake_llm.last_prompt_text()
    assert "Dr. Patel" not in group_prompt and "slot on the 14th" not in group_prompt
    await running.halo.gateway.drain()


async def test_recall_command_lists_hits_by_scope(fake_llm, settings_for, serve_halo, model_dir) -> None:
    settings = settings_for(llm_yaml(fake_llm) + semantic_yaml(model_dir))
    await seed_dm_month_ago(settings)
    running = await serve_halo(settings)
    await running.halo.semantic.sync_all([DM, PARENTS])

    _, body = await running.chat("/recall dentist", token="mom-token")
    assert "1. [this chat · transcript lines 1–2" in body["reply"]
    assert "Dr. Patel" in body["reply"]
    _, body = await running.chat("/recall grandma december", token="mom-token")
    assert "[the parents group · MEMORY.md lines 1–2]" in body["reply"], "a parent's DM may read the parents group"

    reply = await running.halo.gateway.handle(in_parents_group(running, "/recall dentist"))
    assert reply.kind == "command" and "Nothing found" in (reply.text or "")
    _, body = await running.chat("/recall", token="mom-token")
    assert body["reply"].startswith("Usage: /recall")
    assert fake_llm.model_requests == [], "commands never reach the model"
    policy_events = await running.halo.audit.tail(50, kind="policy")
    assert any(e["action"] == "read_memory" and e["resource"] == DM and not e["allowed"] for e in policy_events), (
        "the group's refused read of the DM is audited"
    )


async def test_recall_tool_asks_the_policy_per_scope(fake_llm, settings_for, serve_halo, model_dir) -> None:
    settings = settings_for(llm_yaml(fake_llm) + semantic_yaml(model_dir))
    await seed_dm_month_ago(settings)
    running = await serve_halo(settings)
    await running.halo.semantic.sync_all([DM, PARENTS])

    fake_llm.tool_call("recall", {"query": "dentist appointment"})
    fake_llm.reply("Found it.")
    status, body = await running.chat("Look up the dentist thing", token="mom-token")
    assert status == 200 and body["reply"] == "Found it."
    tool_result = fake_llm.last_prompt_text()
    assert "Dr. Patel has a slot" in tool_result

    fake_llm.tool_call("recall", {"query": "dentist appointment"})
    fake_llm.reply("Nothing.")
    await running.halo.gateway.handle(in_parents_group(running, "@halo look up the dentist thing"))
    assert "Dr. Patel" not in fake_llm.last_prompt_text()
    assert "Nothing found." in fake_llm.last_prompt_text()
    await running.halo.gateway.drain()


async def test_status_reports_semantic_health(fake_llm, settings_for, serve_halo, model_dir) -> None:
    settings = settings_for(llm_yaml(fake_llm) + semantic_yaml(model_dir))
    await seed_dm_month_ago(settings)
    running = await serve_halo(settings)
    await running.halo.semantic.sync_all([DM])
    async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
        body = await resp.json()
    semantic = body["semantic"]
    assert semantic["mode"] == "hybrid"
    assert semantic["sqlite"]["sqlite_vec"].startswith("v")
    assert semantic["embedder"]["state"] == "ready" and semantic["embedder"]["dim"] == 48
    assert semantic["runs"] == 1 and semantic["failures"] == 0 and semantic["last_success"]
    assert semantic["last_error"] is None and semantic["problem"] is None
    assert body["problems"] == [] or not any("semantic" in p for p in body["problems"])
    (scope,) = semantic["scopes"]
    assert scope["scope_id"] == DM and scope["chunks"] == 1 and scope["transcript_lag_bytes"] == 0


async def test_scheduler_syncs_active_scopes_and_request_sync(fake_llm, settings_for, serve_halo, model_dir) -> None:
    settings = settings_for(llm_yaml(fake_llm) + semantic_yaml(model_dir, sync_interval_minutes=0.01))
    running = await serve_halo(settings)
    semantic = running.halo.semantic
    await running.halo.start_background()
    fake_llm.reply("Noted.")
    before_turn = time.time()
    await running.chat("The orthodontist wants to see Aarav about braces", token="mom-token")
    await running.halo.gateway.drain()

    def synced() -> bool:  # only an active scope is synced on the timer (every 0.6 s): the turn made it one
        scope = semantic.sync_health.scopes.get(DM)
        return scope is not None and (scope.last_sync or 0) > before_turn and not semantic.active_scopes()

    await eventually(synced, what="a scheduled sync of the DM")
    assert semantic.status()["running"]

    async def indexed() -> bool:  # a sync during the turn (on PostgreSQL, the scope's take) leaves
        hits = await semantic.search([DM], "orthodontist braces")  # the unanswered line for the next one
        return bool(hits) and "orthodontist" in hits[0].text

    await eventually(indexed, what="the exchange indexed by a scheduled sync")

    # after a distillation, the memory code asks for a sync of that scope
    await write_memory(running.halo, settings.paths.memory_file(DM), "# Facts\nThe puppy's vet is on Oak Road.\n")
    semantic.request_sync(DM)
    semantic.request_sync(DM)  # folded into the queued one
    await eventually(lambda: semantic.search([DM], "vet puppy"), what="the requested sync to index MEMORY.md")
    assert (await semantic.search([DM], "vet puppy"))[0].source == "MEMORY.md"


async def test_recall_is_off_when_disabled(fake_llm, settings_for, serve_halo) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm) + "memory:\n  semantic: {enabled: false}\n"))
    _, body = await running.chat("/recall dentist", token="mom-token")
    assert "Recall is off" in body["reply"]
    async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
        semantic = (await resp.json())["semantic"]
    assert semantic["enabled"] is False and semantic["mode"] == "off"


async def test_status_names_a_degraded_recall(fake_llm, settings_for, serve_halo, tmp_path) -> None:
    missing = tmp_path / "no-model-here"
    settings = settings_for(llm_yaml(fake_llm) + semantic_yaml(missing))
    await seed_dm_month_ago(settings)
    running = await serve_halo(settings)
    await running.halo.semantic.sync_all([DM])
    async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
        body = await resp.json()
    assert body["semantic"]["mode"] == "full-text only"
    assert "could not be loaded" in body["semantic"]["problem"]
    assert any(p.startswith("Search by meaning is off") for p in body["problems"])  # once, in words
    _, reply = await running.chat("/recall dentist", token="mom-token")
    assert "Dr. Patel" in reply["reply"], "full-text recall still works"


async def test_recall_skips_what_the_context_already_shows(fake_llm, settings_for, serve_halo, model_dir) -> None:
    from halo.context.recall import RecallSource, memory_files_in_context

    settings = settings_for(llm_yaml(fake_llm) + semantic_yaml(model_dir))
    await seed_dm_month_ago(settings)
    await seed_memory_file(
        settings, settings.paths.memory_file(DM), "# Facts\nThe dentist is Dr. Patel on Elm Street.\n"
    )
    running = await serve_halo(settings)
    await running.halo.semantic.sync_all([DM])
    sources = running.halo.agents.context.sources
    sources[:] = [s for s in sources if not isinstance(s, RecallSource)]
    sources.append(RecallSource(running.halo.recall, already_in_context=memory_files_in_context))
    fake_llm.reply("ok")
    await running.chat(QUESTION, token="mom-token")
    prompt = fake_llm.last_prompt_text()
    assert "slot on the 14th" in prompt, "older turns are still recalled"
    assert "Elm Street" not in prompt, "MEMORY.md is left to the memory source that shows it whole"


async def test_a_remembered_fact_is_indexed_without_waiting_for_the_schedule(
    fake_llm, settings_for, serve_halo, model_dir
) -> None:
    """Distillation tells the index (memory.on_change → request_sync): no scheduled run needed."""
    settings = settings_for(llm_yaml(fake_llm) + semantic_yaml(model_dir, sync_interval_minutes=60))
    running = await serve_halo(settings)
    semantic = running.halo.semantic
    await running.halo.start_background()
    # the start-up catch-up run finishes first
    await eventually(lambda: semantic.status()["runs"] >= 1, what="the start-up catch-up sync")
    runs_at_start = semantic.status()["runs"]
    await running.chat("remember the puppy's vet is Dr. Okafor on Oak Road", token="mom-token")
    await running.halo.gateway.drain()

    async def indexed_fact() -> bool:
        hits = await semantic.search([DM], "vet puppy Okafor")
        return any(h.source == "MEMORY.md" and "Okafor" in h.text for h in hits)

    await eventually(indexed_fact, what="the remembered fact in the index, without a scheduled run")
    assert semantic.status()["runs"] == runs_at_start  # no scheduled run since: the request did it
