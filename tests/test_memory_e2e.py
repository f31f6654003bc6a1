"""Memory through the whole of halo: web chat over HTTP (and the gateway for Telegram scopes),
the real context builder and Agents SDK, the fake model server, the files on disk."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from halo.context.builder import CUT_MARKER
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.inventory import Halo
from halo.pipeline.gateway import Reply
from memory import daily
from memory.markdown import section_body
from memory.store import memory_md
from memory.when import day_of
from tests.conftest import OWNER_AUTH, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_files import home_memory, memory_names, read_memory, write_memory
from tests.waiting import DEFAULT_WITHIN, eventually

PARENTS_GROUP = "telegram:-1001234"


async def say(
    halo: Halo, member_id: str, scope_id: str, text: str, *, target: str | None = None, addressed: bool = True
) -> Reply:
    """A message through the gateway as it would come from Telegram, then the after-reply work."""
    family = halo.family
    member = family.member(member_id)
    assert member is not None
    envelope = Envelope(
        platform="telegram",
        scope=resolve_scope(family, scope_id),
        speaker=Speaker(str(member.telegram_user_id), member, member.name),
        text=text,
        target=family.member(target) if target else None,
        addressed=addressed,
    )
    reply = await halo.gateway.handle(envelope)
    await halo.gateway.drain()
    return reply


async def chat(running, text: str, token: str = "mom-token") -> str:  # type: ignore[no-untyped-def]
    status, body = await running.chat(text, token=token)
    assert status == 200, body
    await running.halo.gateway.drain()
    return body["reply"]


async def memory_file(halo: Halo, scope_id: str) -> str:
    return await read_memory(halo, halo.settings.paths.memory_file(scope_id))


async def test_shoe_size_is_remembered_in_that_dm_only_until_shared(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    halo = running.halo

    await chat(running, "remember my shoe size is 38")

    assert "- Mom's shoe size: 38 _(Mom, " in await memory_file(halo, "web:mom")
    await chat(running, "/new")  # a fresh session: what is remembered is not in the history any more
    await chat(running, "Which sneakers would fit me?")
    assert "Mom's shoe size: 38" in fake_llm.last_prompt_text()

    await say(halo, "mom", PARENTS_GROUP, "What size shoes should we buy for the trip?")
    assert "shoe size" not in fake_llm.last_prompt_text()
    await say(halo, "mom", "telegram:1002", "What size are my shoes?")  # Mom's other DM is another scope
    assert "shoe size" not in fake_llm.last_prompt_text()  # not "38": the prompt's clock can read 03:38
    await say(halo, "wags", "telegram:1001", "Any idea what shoes Mom wears?", target="mom")
    assert "shoe size" not in fake_llm.last_prompt_text()  # Wags's DM, asking about Mom: not hers to read

    reply = await chat(running, "/share Mom's shoe size is 38")
    assert reply == "Shared with the parents: Mom's shoe size is 38"
    await say(halo, "wags", PARENTS_GROUP, "What shoes for Mom's birthday?")
    prompt = fake_llm.last_prompt_text()
    assert "Mom's shoe size is 38 _(shared by Mom, " in prompt
    assert "shoe" not in await memory_file(halo, "telegram:1002")


async def test_commands_remember_forget_and_a_paginated_memory(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    assert await chat(running, "/memory") == "I don't remember anything in this chat yet. Try /remember <something>."
    assert await chat(running, "/remember my shoe size is 37") == "Remembered: Mom's shoe size: 37"
    assert await chat(running, "/remember my shoe size is 38") == (
        "Remembered: Mom's shoe size: 38 (it replaces what I had before)"
    )
    assert await chat(running, "/remember my shoe size is 38") == "I already remember that: Mom's shoe size: 38"
    assert await chat(running, "/remember my password is hunter2") == (
        "That looks like a password or another secret, and I don't keep those."
    )
    for n in range(1, 22):
        await chat(running, f"/remember item number {n} is in box {n}")

    page1 = await chat(running, "/memory")
    assert page1.startswith("What I remember in this chat (page 1 of 3):\n1. Mom's shoe size: 38 (Mom, ")
    assert page1.endswith("More: /memory 2") and "37" not in page1
    page3 = await chat(running, "/memory 3")
    assert "page 3 of 3" in page3 and "22. Item number 21 is in box 21" in page3 and "More" not in page3

    reply = await chat(running, "/forget my shoe size")
    assert reply.startswith("Done: I removed 2 facts from this chat's memory and ")
    assert reply.endswith(" lines from its daily notes.")  # the day's log of those /remember lines
    assert "shoe size" not in await memory_file(running.halo, "web:mom")
    assert await chat(running, "/forget unicorns") == "I found nothing like that in this chat's memory."
    assert fake_llm.model_requests == []  # all deterministic
    assert "hunter2" not in await memory_file(running.halo, "web:mom")


async def test_agent_tools_remember_and_share_ask_the_policy(fake_llm: FakeOpenAI, settings_for, serve_halo, home):
    settings = settings_for(llm_yaml(fake_llm))
    (home / "policies").mkdir(exist_ok=True)
    (home / "policies" / "no-child-share.cedar").write_text(
        '@id("no-child-share")\n@reason("In our family, children do not share into the parents group.")\n'
        'forbid (principal is Halo::Member, action == Halo::Action::"share", resource)\n'
        'when { principal.role == "child" };\n'
    )
    running = await serve_halo(settings)
    halo = running.halo

    fake_llm.tool_call("remember", {"fact": "my favourite colour is green"})
    fake_llm.reply("I'll remember that.")
    await chat(running, "Green is the best colour, you know", token="aarav-token")
    assert "- Aarav's favourite colour: green _(Aarav, " in await memory_file(halo, "web:aarav")

    fake_llm.tool_call("share", {"text": "I broke the kitchen window"})
    fake_llm.reply("I couldn't share that.")
    await chat(running, "tell my parents I broke the kitchen window", token="aarav-token")
    tool_output = fake_llm.prompt_text(fake_llm.scripted_requests[-1])  # not the safety classifier's
    assert "I can't share that: In our family, children do not share into the parents group." in tool_output
    assert await memory_file(halo, PARENTS_GROUP) == ""

    fake_llm.tool_call("share", {"text": "the school trip is tomorrow"})
    fake_llm.reply("Shared.")
    await chat(running, "please tell the parents group about the trip", token="wags-token")
    tomorrow = day_of(time_now()) + timedelta(days=1)
    assert f"- the school trip is {tomorrow.isoformat()} _(shared by Wags, " in await memory_file(halo, PARENTS_GROUP)
    events = await halo.audit.tail(50, kind="policy")
    assert any(e["action"] == "share" and e["principal"] == "aarav" and not e["allowed"] for e in events)


def time_now() -> datetime:
    return datetime.now(UTC)


async def test_target_profile_only_when_the_policy_allows(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    halo = running.halo
    paths = halo.settings.paths
    await write_memory(halo, paths.user_file("aarav"), "# Aarav\n\n- Plays the cello on Thursdays\n")
    await write_memory(halo, paths.user_file("mom"), "# Mom\n\n- Runs every morning at six\n")

    await say(halo, "mom", "telegram:1002", "What does Aarav have on Thursday?", target="aarav")
    prompt = fake_llm.last_prompt_text()
    assert "Plays the cello on Thursdays" in prompt and "Runs every morning at six" in prompt

    await say(halo, "aarav", "telegram:1003", "When does Mom go running?", target="mom")
    prompt = fake_llm.last_prompt_text()
    assert "Runs every morning" not in prompt and "cello" in prompt  # his own profile, not hers

    # not a status question: those are answered from the task list alone (halo/work/status.py)
    await say(halo, "wags", "discord:3001", "when is the release due?", target="aarav")
    assert "cello" not in fake_llm.last_prompt_text()  # nothing of the family from a work channel
    reads = [e for e in await halo.audit.tail(50, kind="policy") if e["action"] == "read_memory"]
    assert {(e["principal"], e["resource"], e["allowed"]) for e in reads} >= {
        ("mom", "member:aarav", True),
        ("aarav", "member:mom", False),
        ("wags", "member:aarav", False),
    }


async def test_a_parents_edit_reaches_the_next_prompt(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    await chat(running, "/remember the spare key is under the blue pot")
    path = running.halo.settings.paths.memory_file("web:mom")
    await write_memory(running.halo, path, (await read_memory(running.halo, path)).replace("blue pot", "red pot"))
    await chat(running, "Where is the spare key?")
    prompt = fake_llm.last_prompt_text()
    assert "under the red pot" in prompt


async def test_daily_file_gets_user_and_halo_lines_redacted(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("Okay, I won't share your token ghp_abcdefghijklmnopqrstuvwx. Anything else?")
    await chat(running, "my wifi password is hunter2, don't tell anyone")
    await say(running.halo, "wags", PARENTS_GROUP, "just chatting among ourselves", addressed=False)

    today = day_of(time_now())
    text = await read_memory(running.halo, running.halo.settings.paths.daily_file("web:mom", today))
    log = (section_body(text, daily.TRANSCRIPT) or "").split("\n")
    assert log[0].endswith("[user] Mom: my wifi password is [redacted] don't tell anyone")
    assert log[1].endswith("[halo] Okay, I won't share your token [redacted].")
    assert "hunter2" not in text and "ghp_" not in text
    group = await read_memory(running.halo, running.halo.settings.paths.daily_file(PARENTS_GROUP, today))
    assert "[user] Wags: just chatting among ourselves" in group  # kept, unanswered, still logged


async def test_chat_never_waits_for_distillation(fake_llm: FakeOpenAI, settings_for, serve_halo, monkeypatch):
    running = await serve_halo(settings_for(llm_yaml(fake_llm) + "memory: {distillation_every_n_items: 1}\n"))
    memory = running.halo.memory
    assert memory is not None
    real_run = memory.distiller.run
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def held_run(scope_id: str):  # type: ignore[no-untyped-def]
        started.set()
        release.wait(timeout=DEFAULT_WITHIN)  # held until the test lets go (runs in a worker thread)
        try:
            return real_run(scope_id)
        finally:
            finished.set()

    monkeypatch.setattr(memory.distiller, "run", held_run)
    fake_llm.reply("Hello!")
    fake_llm.reply("Sounds fun.")
    try:
        status, first = await running.chat("hello there")  # every item distils: a run starts and is held
        assert status == 200 and first["reply"] == "Hello!"
        await eventually(started.is_set, what="a distillation run to start after the first turn")
        status, body = await asyncio.wait_for(running.chat("we went to the zoo"), timeout=DEFAULT_WITHIN)
        assert status == 200 and body["reply"] == "Sounds fun."
        assert not finished.is_set(), "the reply came only after the distillation finished"
    finally:
        release.set()
    await running.halo.gateway.drain()
    assert finished.is_set()


async def test_status_reports_distillation(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    await chat(running, "remember my shoe size is 38")
    async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
        body = await resp.json()
    distillation = body["distillation"]
    assert distillation["enabled"] is True and distillation["every_n_items"] == 20
    assert distillation["extractor"] == "deterministic" and distillation["failing"] == []
    state = distillation["scopes"]["web:mom"]["distill"]
    assert state["runs"] == 1 and state["failures"] == 0 and state["last_error"] is None
    assert state["watermark"] > 0 and state["last_success"] is not None and state["next_retry"] is None


async def test_the_api_the_admin_endpoint_calls(fake_llm: FakeOpenAI, settings_for, serve_halo):
    from memory.service import DistillationDisabled

    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    memory = running.halo.memory
    assert memory is not None
    await running.chat("we planted tomatoes", token="mom-token")
    result = await memory.distill("web:mom")
    assert result.notes_added == 2 and result.items == 2
    assert memory.memory_path("web:mom") == memory.files.store.where(memory_md("web:mom"))
    assert "web:mom" in (await memory.status())["scopes"]
    await running.halo.semantic.forget_scope("web:mom")  # as the admin purge does first
    assert await memory.purge("web:mom") is True  # for the admin purge, after its confirmation
    folder = running.halo.settings.paths.scope_dir("web:mom")  # the index may come back: the transcript stays
    assert await memory_file(running.halo, "web:mom") == "" and not (folder / "daily").exists()
    assert await memory_names(running.halo, folder) == []
    assert "web:mom" not in (await memory.status())["scopes"]

    off = await serve_halo(settings_for(llm_yaml(fake_llm) + "memory: {distillation_enabled: false}\n"))
    with pytest.raises(DistillationDisabled):
        await off.halo.memory.distill("web:mom")


def test_halo_distill_cli(settings_for, home: Path, monkeypatch, capsys):
    from halo.runtime.cli import main
    from tests.seeding import seed_lines
    from transcripts.lines import Message

    settings = settings_for("")
    monkeypatch.setenv("HALO_HOME", str(home))
    line = Message(
        id="1",
        ts=time_now(),
        scope_id="telegram:1002",
        text="remember the bins go out on Monday",
        speaker="mom",
    )
    asyncio.run(seed_lines(settings, line))

    assert main(["distill", "telegram:1002"]) == 0
    out = capsys.readouterr().out
    assert "distilled telegram:1002: 1 new transcript items" in out and "facts +1" in out
    assert "memory file: " in out
    assert "- The bins go out on Monday _(Mom, " in (asyncio.run(home_memory(home, memory_md("telegram:1002"))) or "")
    assert main(["distill", "telegram:1002"]) == 0
    assert "0 new transcript items" in capsys.readouterr().out
    assert main(["distill", "nonsense"]) == 2


async def test_a_quiet_scope_is_extracted_with_the_cheap_model(fake_llm: FakeOpenAI, settings_for, serve_halo):
    yaml = llm_yaml(fake_llm) + "  cheap_model: fake-cheap\nmemory: {extractor: llm, quiet_minutes: 0.002}\n"
    running = await serve_halo(settings_for(yaml))
    fake_llm.reply("Noted!")
    fake_llm.reply(
        json.dumps(
            {
                "entries": [
                    {
                        "type": "preference",
                        "content": "Mom prefers aisle seats on planes",
                        "confidence": 0.9,
                        "evidence": "I always prefer aisle seats",
                        "about": "Mom",
                    }
                ]
            }
        )
    )

    memory = running.halo.memory
    await chat(running, "I always prefer aisle seats on planes, never the window")

    # the quiet timer (0.12 s) fires, then the cheap model answers
    async def extracted() -> bool:
        return "extract" in (await memory.status())["scopes"].get("web:mom", {})

    await eventually(extracted, what="an extraction run after the quiet time")

    assert "- Mom prefers aisle seats on planes _(preference, 0.90, " in await memory_file(running.halo, "web:mom")
    assert [r.json["model"] for r in fake_llm.chat_requests] == ["fake-model", "fake-cheap"]
    status = await memory.status()
    assert status["extractor"] == "llm" and status["scopes"]["web:mom"]["extract"]["runs"] == 1


async def test_a_memory_too_big_for_the_budget_is_cut_from_its_oldest_part(
    fake_llm: FakeOpenAI, settings_for, serve_halo
):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    path = running.halo.settings.paths.memory_file("web:mom")
    await write_memory(
        running.halo,
        path,
        "# Memory\n\n## Facts\n\n"
        + "".join(
            f"- Fact number {n} is about the garden shed and what is stored in it _(Mom, 2026-02-13)_\n"
            for n in range(400)
        ),
    )
    await chat(running, "What is in the shed?")
    prompt = fake_llm.last_prompt_text()
    assert CUT_MARKER in prompt
    assert "Fact number 399 " in prompt and "Fact number 0 " not in prompt


async def test_extraction_is_unavailable_unless_configured(fake_llm: FakeOpenAI, settings_for, serve_halo):
    from memory.service import ExtractionUnavailable

    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    with pytest.raises(ExtractionUnavailable, match=r"memory\.extractor"):
        await running.halo.memory.extract("web:mom")


async def test_a_forget_reaches_daily_log_lines_not_written_yet(fake_llm: FakeOpenAI, settings_for, serve_halo):
    """Daily log lines are written in batches (memory.service.LOG_EVERY_SECONDS); a forget that
    comes before the batch is written still removes them, and nothing else is lost."""
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("Nice, a green bike.")
    status, _ = await running.chat("I bought a green bike today", token="mom-token")
    assert status == 200
    status, _ = await running.chat("I had soup for lunch", token="mom-token")
    assert status == 200  # no drain: both turns' log lines may still be held back
    await running.halo.memory.forget("web:mom", "green bike")
    await running.halo.gateway.drain()

    text = await read_memory(running.halo, running.halo.settings.paths.daily_file("web:mom", day_of(time_now())))
    assert "bike" not in text
    assert "[user] Mom: I had soup for lunch" in text
