"""Cheap first: the level each message is answered at, the usage it cost, the budget that caps it.

Real parts throughout: halo built from halo.yaml, the real Agents SDK against the stand-in
model (which reports usage as a provider does), halo.db on disk, the transcript and the
audit log as written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_settings
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.core.turn import Turn
from halo.inventory import Halo
from halo.routing.levels import Level
from halo.runtime.app import build_halo
from halo.usage.prices import Prices
from memory.when import day_of
from tests.audit_support import audit_events
from tests.conftest import FAMILY_YAML, OWNER_AUTH, Outbox, default_level_triage, low_risk_classifier, write_home
from tests.fakes.llm_server import FakeOpenAI, count_tokens
from tests.memory_files import write_memory
from transcripts.lines import Closing, Message, Reply

ROUTED_FAMILY = FAMILY_YAML.replace("routing: {enabled: false}", "routing: {enabled: true}")


def routed_yaml(fake: FakeOpenAI, extra: str = "") -> str:
    return f"""\
family: {{name: Sharma, timezone: Europe/London}}
llm:
  provider: openai-compatible
  model: main-model
  cheap_model: cheap-model
  strong_model: strong-model
  base_url: {fake.base_url}
  api_key: test-key
  max_retries: 0
  timeout_seconds: 5
  prices:
    cheap-model: {{input: 1, cached_input: 0.5, output: 2}}
    main-model: {{input: 10, cached_input: 5, output: 20}}
    strong-model: {{input: 100, cached_input: 50, output: 200}}
memory:
  semantic: {{embedder: none}}
{extra}"""


def build(home: Path, fake: FakeOpenAI, extra: str = "") -> Halo:
    family = ROUTED_FAMILY.replace("family: {name: Sharma}\n", "")
    write_home(home, routed_yaml(fake, extra), family=family)
    return build_halo(load_settings(home))


@pytest.fixture
async def halo(home: Path, fake_llm: FakeOpenAI) -> AsyncIterator[Halo]:
    running = build(home, fake_llm)
    yield running
    await running.close()


def envelope(halo: Halo, member_id: str, text: str) -> Envelope:
    family = halo.family
    member = family.member(member_id)
    assert member is not None and member.telegram_user_id is not None
    user_id = str(member.telegram_user_id)
    return Envelope("telegram", resolve_scope(family, f"telegram:{user_id}"), Speaker(user_id, member=member), text)


def reply_models(fake: FakeOpenAI) -> list[str]:
    """The model each reply call went to (side calls such as the triage are intercepted)."""
    return [r.json["model"] for r in fake.scripted_requests]


def transcript_marks(halo: Halo, scope_id: str) -> list[tuple[str, str | None, str | None]]:
    return [
        (line.role, line.level.level, line.level.reason)
        if isinstance(line, Reply | Closing)
        else (line.role, None, None)
        for line in halo.transcripts.tail(scope_id, 50)
        if not isinstance(line, Message)
    ]


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("thanks!", Level.L0),
        ("ok thanks Mom 👍", Level.L0),
        ("👍🎉", Level.L0),
        ("good night everyone", Level.L0),
        ("why is the sky blue?", Level.L1),
        ("tell me a joke", Level.L1),
        ("what colour is a flamingo?", Level.L1),
        # a first-person word or a weekday's name alone needs no memory or tools (issue 32)
        ("tell me a short joke", Level.L1),
        ("what day comes after Tuesday?", Level.L1),
        ("how long should I boil an egg?", Level.L1),
        ("what is on this Tuesday?", Level.L2),
        ("what colour is my bike?", Level.L2),
        ("can you remind me about the dentist tomorrow?", Level.L2),
        ("what does Aarav have on Friday?", Level.L2),
        ("think hard about where we should go for the summer holiday", Level.L3),
        (
            "compare the two broadband offers we were sent and tell me which suits a family of four better",
            Level.L3,
        ),
    ],
)
async def test_the_rules_give_each_message_its_least_level(halo: Halo, text: str, level: Level) -> None:
    router = halo.gateway.router
    assert router is not None
    route = await router.route(Turn(envelope(halo, "mom", text), halo.policy))
    assert route.level == level, route


async def test_what_the_rules_cannot_tell_goes_to_a_triage_call_on_the_cheap_model(
    halo: Halo, fake_llm: FakeOpenAI
) -> None:
    fake_llm.interceptors.remove(default_level_triage)  # this test answers the triage itself
    fake_llm.reply("L1")
    router = halo.gateway.router
    assert router is not None
    route = await router.route(Turn(envelope(halo, "mom", "Pluto"), halo.policy))
    assert (route.level, route.reason) == (Level.L1, "triage: L1")
    [triage] = fake_llm.model_requests
    assert triage.json["model"] == "cheap-model" and "Pluto" in fake_llm.prompt_text(triage)


async def test_a_young_child_never_gets_the_strong_model(halo: Halo, fake_llm: FakeOpenAI) -> None:
    router = halo.gateway.router
    assert router is not None
    route = await router.route(Turn(envelope(halo, "tara", "think hard about why dinosaurs died"), halo.policy))
    assert (route.level, route.wanted) == (Level.L2, Level.L3)
    assert "a young child's profile" in route.reason
    reply = await halo.gateway.handle(envelope(halo, "tara", "think hard about why dinosaurs died"))
    await halo.gateway.drain()
    assert reply.kind == "model" and reply_models(fake_llm) == ["main-model"]
    assert ("assistant", "L2", route.reason) in transcript_marks(halo, "telegram:1004")


async def test_each_level_reaches_its_model_and_the_transcript_and_audit_log_say_why(
    halo: Halo, fake_llm: FakeOpenAI
) -> None:
    gateway = halo.gateway
    thanks = await gateway.handle(envelope(halo, "mom", "thanks!"))
    assert (thanks.text, thanks.kind) == ("You're welcome!", "command")
    assert fake_llm.model_requests == []  # L0: no model at all
    for text in ("why is the sky blue?", "what is on my list for the weekend?", "think hard about our summer plans"):
        reply = await gateway.handle(envelope(halo, "mom", text))
        assert reply.kind == "model"
    await gateway.drain()
    assert reply_models(fake_llm) == ["cheap-model", "main-model", "strong-model"]
    marks = transcript_marks(halo, "telegram:1002")
    assert [(role, level) for role, level, _ in marks] == [
        ("assistant", "L0"),
        ("assistant", "L1"),
        ("assistant", "L2"),
        ("assistant", "L3"),
    ]
    assert marks[3][2] == "asked to think hard"
    events = await audit_events(halo)
    routes = [(e["level"], e["level_reason"]) for e in events if e.get("kind") == "route"]
    assert routes[0] == ("L0", "thanks: no model needed") and routes[3] == ("L3", "asked to think hard")


async def test_a_yes_to_halos_question_goes_to_the_model_a_greeting_after_one_does_not(
    halo: Halo, fake_llm: FakeOpenAI
) -> None:
    gateway = halo.gateway
    hello = await gateway.handle(envelope(halo, "mom", "hi"))
    assert hello.text == "Hi Mom! What can I do for you?"  # halo's own canned question ...
    again = await gateway.handle(envelope(halo, "mom", "good morning"))
    assert again.kind == "command" and fake_llm.model_requests == []  # ... which a greeting does not answer

    fake_llm.reply("Shall I remind you about the dentist too?")
    await gateway.handle(envelope(halo, "mom", "what is on my list for the weekend?"))
    fake_llm.reply("Done: a reminder for the dentist.")
    yes = await gateway.handle(envelope(halo, "mom", "yes"))  # answers halo's question: the model needs the chat
    await gateway.drain()
    assert (yes.text, yes.kind) == ("Done: a reminder for the dentist.", "model")
    assert transcript_marks(halo, "telegram:1002")[-1][1:] == ("L2", "answers halo's question")


async def test_small_talk_is_sent_the_durable_memory_not_the_days_notes(halo: Halo, fake_llm: FakeOpenAI) -> None:
    paths = halo.paths
    await write_memory(
        halo, paths.memory_file("telegram:1002"), "# Memory\n\n## Facts\n\n- Mom's bike is the red one\n"
    )
    notes = paths.daily_file("telegram:1002", day_of(datetime.now(UTC)))
    await write_memory(halo, notes, "- the plumber comes at noon\n")  # a parent's hand-made note for today
    await halo.gateway.handle(envelope(halo, "mom", "why is the sky blue?"))
    await halo.gateway.handle(envelope(halo, "mom", "what colour is my bike?"))
    await halo.gateway.drain()
    small_talk, about_mom = fake_llm.scripted_requests
    assert (small_talk.json["model"], about_mom.json["model"]) == ("cheap-model", "main-model")
    lean, whole = (fake_llm.prompt_text(r) for r in (small_talk, about_mom))
    assert "the red one" in lean and "the red one" in whole  # the durable facts go to every level
    assert "plumber" in whole and "plumber" not in lean  # L1: not the day's notes, nor recall
    assert "Speaking: Mom" in lean and "## Persona" in lean
    assert "tools" not in small_talk.json


async def test_in_a_group_an_acknowledgement_gets_no_reply_and_closes_the_message(
    halo: Halo, fake_llm: FakeOpenAI
) -> None:
    family = halo.family
    mom = family.member("mom")
    group = Envelope("telegram", resolve_scope(family, "telegram:-1001234"), Speaker("1002", member=mom), "ok 👍")
    reply = await halo.gateway.handle(group)
    assert (reply.text, reply.kind) == (None, "silent") and fake_llm.model_requests == []
    [line] = [line for line in halo.transcripts.tail("telegram:-1001234", 5) if line.role != "user"]
    assert isinstance(line, Closing) and (line.answers, line.level.level) == (group.id, "L0")


async def test_usage_is_what_the_provider_reported_summed_exactly(halo: Halo, fake_llm: FakeOpenAI) -> None:
    fake_llm.interceptors.remove(default_level_triage)  # the child's classifier stays answered
    fake_llm.reply("L2")  # the triage of "Pluto", on the cheap model
    fake_llm.reply("Pluto is a dwarf planet.")
    fake_llm.reply("Blue light scatters most.")
    await halo.gateway.handle(envelope(halo, "mom", "Pluto"))
    await halo.gateway.handle(envelope(halo, "aarav", "why is the sky blue?"))
    await halo.gateway.drain()
    requests = fake_llm.scripted_requests  # the child's classifier calls are intercepted, and counted apart
    assert [r.json["model"] for r in requests] == ["cheap-model", "main-model", "cheap-model"]
    answers = ["L2", "Pluto is a dwarf planet.", "Blue light scatters most."]
    reported = [
        (count_tokens(fake_llm.prompt_text(r)), count_tokens(text)) for r, text in zip(requests, answers, strict=True)
    ]
    store = halo.usage.store
    day = halo.gateway.router.budget.meter.today()  # type: ignore[union-attr]
    by_purpose = {(t.key, t.model): t for t in await store.totals(day, day, "purpose")}
    assert by_purpose[("triage", "cheap-model")].input_tokens == reported[0][0]
    assert by_purpose[("reply", "main-model")].input_tokens == reported[1][0]
    assert by_purpose[("reply", "main-model")].output_tokens == reported[1][1]
    by_member = {
        (t.key, t.model): (t.calls, t.input_tokens, t.output_tokens) for t in await store.totals(day, day, "member")
    }
    assert by_member == {
        ("mom", "cheap-model"): (1, reported[0][0], reported[0][1]),
        ("mom", "main-model"): (1, reported[1][0], reported[1][1]),
        # the child's reply and the safety classifier's two calls (in and out), all on the cheap model
        ("aarav", "cheap-model"): (
            3,
            reported[2][0] + sum(count_tokens(fake_llm.prompt_text(r)) for r in fake_llm.intercepted_requests),
            reported[2][1]
            + sum(count_tokens(low_risk_classifier(r.json) or "") for r in fake_llm.intercepted_requests),
        ),
    }
    by_level = {t.key for t in await store.totals(day, day, "level")}
    assert by_level == {None, "L1", "L2"}  # the triage and the classifier are no reply level
    classifier = [t for t in await store.totals(day, day, "purpose") if t.key == "classifier"]
    assert sum(t.calls for t in classifier) == len(fake_llm.intercepted_requests) == 2  # in and out


def test_prices_cost_each_kind_of_token_and_say_when_they_are_unknown() -> None:
    prices = Prices()
    assert prices.cost("gpt-4.1-mini", 1_000_000, 0, 0) == pytest.approx(0.40)
    assert prices.cost("gpt-4.1-mini-2025-04-14", 1_000_000, 1_000_000, 1_000_000) == pytest.approx(0.10 + 1.60)
    assert prices.cost("anthropic/claude-haiku-4-5", 2_000_000, 0, 0) == pytest.approx(2.00)
    assert prices.cost("my-local-llama", 1000, 0, 1000) is None
    from config.settings import ModelPrice

    mine = Prices({"my-local-llama": ModelPrice(input=0, output=0), "gpt-4.1-mini": ModelPrice(input=1, output=2)})
    assert mine.cost("my-local-llama", 1000, 0, 1000) == 0
    assert mine.cost("gpt-4.1-mini", 1_000_000, 500_000, 0) == pytest.approx(1.0)  # cached at the input price


async def test_a_budget_crossing_tells_the_parents_once_then_caps_then_keeps_the_message(
    home: Path, fake_llm: FakeOpenAI
) -> None:
    # main-model at $10/M input: a reply of a few hundred prompt words costs a few thousandths of a dollar
    halo = build(home, fake_llm, "budget: {daily_usd: 0.0015, cheap_overrun_share: 1.0}\n")
    outbox = Outbox()
    halo.delivery.register("telegram", outbox)
    try:
        gateway = halo.gateway
        first = await gateway.handle(envelope(halo, "aarav", "what is on my list for the weekend?"))
        await gateway.drain()
        assert first.kind == "model" and reply_models(fake_llm) == ["main-model"]
        spent = (await halo.gateway.router.budget.spend(None)).family  # type: ignore[union-attr]
        assert spent > 0.0015, "the scenario needs the first reply to spend the budget"
        notices = [text for scope, text in outbox.sent if "model budget" in text]
        # one notice to each parent's DM: spent (the 80 % notice is not sent late)
        assert sorted(scope for scope, text in outbox.sent if "model budget" in text) == [
            "telegram:1001",
            "telegram:1002",
        ]
        assert all("spent today's model budget" in text for text in notices)
        # spent: a message that wants L2 is answered at L1, on the cheap model
        second = await gateway.handle(envelope(halo, "aarav", "what is on my list for the weekend?"))
        await gateway.drain()
        assert second.kind == "model" and reply_models(fake_llm)[-1] == "cheap-model"
        assert second.route is not None and second.route.capped
        # L1 over as well: a clear reply, no model, and the message kept for later
        while (await halo.gateway.router.budget.cap("aarav"))[0] > Level.L0:  # type: ignore[union-attr]
            await gateway.handle(envelope(halo, "aarav", "why is the sky blue?"))
        calls = len(fake_llm.model_requests)
        last = envelope(halo, "aarav", "what should I get Sam for his party on Saturday?")
        kept = await gateway.handle(last)
        await gateway.drain()
        assert kept.text is not None and "budget is spent; your message is saved" in kept.text
        assert len(fake_llm.model_requests) == calls
        tail = halo.transcripts.tail("telegram:1003", 3)
        assert [(line.role, line.text) for line in tail[-2:]] == [
            ("user", "what should I get Sam for his party on Saturday?"),
            ("event", "the model budget is spent: the message was kept"),
        ]
        # what code carries out needs no budget: "remember that …" is kept as /remember keeps it
        kept_fact = await gateway.handle(envelope(halo, "aarav", "please remember that Sam's party is on Saturday"))
        assert kept_fact.text is not None and kept_fact.text.startswith("Remembered: ")
        assert len(fake_llm.model_requests) == calls
        # and the parents heard once only
        assert len([text for _, text in outbox.sent if "model budget" in text]) == 2
    finally:
        await halo.close()


async def test_a_parent_sees_the_spend_per_person_and_a_child_cannot(
    home: Path, fake_llm: FakeOpenAI, serve_halo: Any
) -> None:
    family = ROUTED_FAMILY.replace("family: {name: Sharma}\n", "")
    write_home(home, routed_yaml(fake_llm), family=family)
    running = await serve_halo(load_settings(home))
    status, body = await running.chat("why is the sky blue?", token="mom-token")
    assert (status, body["reply"]) == (200, "Hello from the fake model")
    await running.halo.gateway.drain()
    async with running.http.get(running.url("/usage?by=member"), headers=OWNER_AUTH) as resp:
        report = await resp.json()
    assert resp.status == 200
    [row] = [row for row in report["rows"] if row["key"] == "mom"]
    prompt = count_tokens(fake_llm.prompt_text(fake_llm.scripted_requests[0]))
    output = count_tokens("Hello from the fake model")
    assert (row["inputTokens"], row["outputTokens"]) == (prompt, output)
    assert row["usd"] == pytest.approx((prompt * 1 + output * 2) / 1_000_000)  # cheap-model's price
    async with running.http.get(running.url("/usage?by=nobody"), headers=OWNER_AUTH) as resp:
        assert resp.status == 400
    async with running.http.get(running.url("/usage"), headers={"Authorization": "Bearer aarav-token"}) as resp:
        assert resp.status == 403
    async with running.http.get(running.url("/"), headers=OWNER_AUTH) as resp:
        assert 'id="spend-chart"' in await resp.text()


async def test_usage_command_answers_parents_only(halo: Halo, fake_llm: FakeOpenAI) -> None:
    await halo.gateway.handle(envelope(halo, "mom", "why is the sky blue?"))
    await halo.gateway.drain()
    mine = await halo.gateway.handle(envelope(halo, "mom", "/usage"))
    assert mine.text is not None and "Today: $0.0" in mine.text and "mom $0.0" in mine.text
    child = await halo.gateway.handle(envelope(halo, "aarav", "/usage"))
    assert child.text == "Sorry, only parents can see what halo costs: Only parents administer halo."
    assert "$" not in child.text


async def test_a_status_question_the_task_list_answers_is_l0_no_model(halo: Halo, fake_llm: FakeOpenAI) -> None:
    """A work status question is answered before the router from the task list, worded by
    rules: no model call, and the transcript, the audit and the usage say L0."""
    family = halo.family
    priya = family.member("priya")
    channel = resolve_scope(family, "discord:3001")
    assert halo.tasks is not None
    await halo.tasks.add("ContextForge", "Ship the API", scope_id=channel.id, by="priya")
    reply = await halo.gateway.handle(
        Envelope("discord", channel, Speaker("2001", member=priya), "what's blocked?", addressed=True)
    )
    await halo.gateway.drain()
    assert reply.text == "Nothing is blocked."
    assert fake_llm.model_requests == []
    assert transcript_marks(halo, channel.id) == [("assistant", "L0", "status: the task list answers")]
    events = await audit_events(halo)
    assert [e["level"] for e in events if e.get("kind") == "route"] == ["L0"]
    day = halo.gateway.router.budget.meter.today()  # type: ignore[union-attr]
    assert await halo.usage.store.totals(day, day, "purpose") == []


async def test_with_one_model_at_every_level_no_triage_call_is_made(home: Path, fake_llm: FakeOpenAI) -> None:
    """Without cheap_model and strong_model every level is llm.model: a triage could not change
    which model answers, so a message the rules can't place costs one model call, not two."""
    yaml = (
        routed_yaml(fake_llm).replace("  cheap_model: cheap-model\n", "").replace("  strong_model: strong-model\n", "")
    )
    write_home(home, yaml, family=ROUTED_FAMILY.replace("family: {name: Sharma}\n", ""))
    halo = build_halo(load_settings(home))
    try:
        fake_llm.interceptors.remove(default_level_triage)  # a triage call would be sent and seen here
        fake_llm.reply("Pluto is a dwarf planet.")
        reply = await halo.gateway.handle(envelope(halo, "mom", "Pluto"))
        assert reply.text == "Pluto is a dwarf planet."
        assert [r.json["model"] for r in fake_llm.model_requests] == ["main-model"]
        assert transcript_marks(halo, reply.scope_id)[-1][1:] == ("L2", "the default")
    finally:
        await halo.close()
