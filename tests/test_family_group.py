"""The whole-family group: answered only when addressed, guarded for its children, no private
tools, and nothing from a parent's DM (or the parents group) in its prompts — neither what was
said there nor what memory keeps of it."""

from __future__ import annotations

import asyncio
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from agents import RunContextWrapper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.core.turn import TurnRun
from halo.pipeline.gateway import Reply
from halo.runtime.app import build_halo
from halo.tools.guarded import guarded_tool
from tests.conftest import llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_files import read_memory
from tests.safety_support import SAFETY_FAMILY, SafetyScript, alerts, family_settings, transcript

GROUP = -1005
WITH_GROUP = SAFETY_FAMILY + f"family_group: {{telegram_chat_id: {GROUP}}}\n"


@guarded_tool("private")
async def read_calendar(ctx: RunContextWrapper[TurnRun]) -> str:
    """A member's private calendar (a stand-in private tool)."""
    return "dentist at 3"


async def send(halo: Any, member_id: str, scope_id: str, text: str, *, addressed: bool = True) -> Reply:
    family = halo.family
    member = family.member(member_id)
    platform = scope_id.split(":")[0]
    return await halo.gateway.handle(
        Envelope(
            platform=platform,
            scope=resolve_scope(family, scope_id),  # type: ignore[arg-type]
            speaker=Speaker(member_id, member),
            text=text,
            addressed=addressed,
        )
    )


async def test_unaddressed_messages_get_no_reply(home, serve_halo) -> None:
    async with FakeOpenAI(responder=SafetyScript()) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake), family=WITH_GROUP))
        reply = await send(running.halo, "mom", f"telegram:{GROUP}", "dinner at 7 everyone", addressed=False)
        child = await send(running.halo, "tara", f"telegram:{GROUP}", "yay pasta", addressed=False)
    assert (reply.text, reply.kind) == (None, "kept") and (child.text, child.kind) == (None, "kept")
    assert fake.model_requests == []
    assert transcript(running.halo, f"telegram:{GROUP}") == [("user", "dinner at 7 everyone"), ("user", "yay pasta")]


async def test_a_childs_unaddressed_cry_for_help_still_reaches_the_parents(home, serve_halo) -> None:
    async with FakeOpenAI(responder=SafetyScript()) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake), family=WITH_GROUP))
        reply = await send(running.halo, "tara", f"telegram:{GROUP}", "I want to hurt myself", addressed=False)
        await running.halo.gateway.drain()
    assert reply.text is None and fake.model_requests == []
    for parent in ("wags", "mom"):
        (alert,) = await alerts(running.halo, parent)
        assert "in the family group" in alert and "self-harm" in alert


async def test_children_in_the_family_make_the_whole_group_guarded(home, serve_halo) -> None:
    long_reply = "Here is the plan. " * 60
    script = SafetyScript(reply=long_reply)
    async with FakeOpenAI(responder=script) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake), family=WITH_GROUP))
        running.halo.agents.tools.append(read_calendar)
        reply = await send(running.halo, "wags", f"telegram:{GROUP}", "halo, what's the weekend plan?")
        assistant = [r for r in fake.chat_requests if not r.json.get("response_format")]
        offered = {t["function"]["name"] for t in assistant[-1].json.get("tools", [])}
        # a parent asking about a blocked topic there gets steered to a private chat
        script.reply = "Poker night rules: bring chips and bets."
        steered = await send(running.halo, "mom", f"telegram:{GROUP}", "halo, rules for tonight's game?")
        dm = await send(running.halo, "wags", "telegram:1001", "halo, what's on my calendar?")
        dm_offered = {t["function"]["name"] for t in fake.chat_requests[-1].json.get("tools", [])}
    young = running.halo.family.safety.profile("young_child")
    assert len(reply.text or "") <= young.max_reply_chars  # the youngest child's limit, for everyone
    assert script.classified, "the group's turns are classified"
    assert "Children are in this chat" in assistant[-1].json["messages"][0]["content"]  # told who is listening
    assert "read_calendar" not in offered and "current_time" in offered  # no private tools there
    assert "read_calendar" in dm_offered and dm.kind == "model"
    assert steered.kind == "guarded" and "private chat" in (steered.text or "")
    assert await alerts(running.halo, "wags") == []  # an adult's blocked topic is no alarm


async def test_a_teen_escalating_in_the_group_is_answered_as_a_teen(home, serve_halo) -> None:
    async with FakeOpenAI(responder=SafetyScript()) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake), family=WITH_GROUP))
        reply = await send(running.halo, "aarav", f"telegram:{GROUP}", "halo, sometimes I want to die")
        await running.halo.gateway.drain()
    assert reply.kind == "guarded" and "another adult you trust" in (reply.text or "")
    (alert,) = await alerts(running.halo, "wags")
    assert "in the family group" in alert and "want to die" not in alert  # his profile keeps his words


async def test_an_adults_emergency_in_the_group_still_gets_help(home, serve_halo) -> None:
    async with FakeOpenAI(responder=SafetyScript()) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake), family=WITH_GROUP))
        reply = await send(running.halo, "mom", f"telegram:{GROUP}", "halo, the kitchen is on fire!")
    assert reply.kind == "guarded" and "emergency number" in (reply.text or "")
    assert fake.model_requests == []


async def test_a_family_without_children_has_an_unguarded_group(home, serve_halo) -> None:
    adults = "\n".join(line for line in WITH_GROUP.splitlines() if "role: child" not in line) + "\n"
    script = SafetyScript(reply="Pizza it is.")
    async with FakeOpenAI(responder=script) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake), family=adults))
        reply = await send(running.halo, "wags", f"telegram:{GROUP}", "halo, dinner idea?")
    assert reply.text == "Pizza it is." and script.classified == []


# --- property: a parent's DM (or the parents group) never reaches a family-group prompt ------------

NAMES = ["Ana", "Ben", "Chen", "Dev", "Eli", "Fatima", "Gus", "Hana", "Ivo", "Jo", "Kai", "Lena"]


@st.composite
def families(draw: st.DrawFn) -> dict[str, Any]:
    parents = draw(st.integers(min_value=1, max_value=3))
    children = draw(st.lists(st.sampled_from(["young_child", "adolescent"]), max_size=3))
    visibility = draw(st.lists(st.booleans(), min_size=len(children), max_size=len(children)))
    names = draw(st.permutations(NAMES))
    members = [{"id": f"p{i}", "name": names[i], "role": "parent", "telegram_user_id": 100 + i} for i in range(parents)]
    members += [
        {
            "id": f"c{i}",
            "name": names[parents + i],
            "role": "child",
            "age_group": group,
            "parental_visibility": visibility[i],
            "telegram_user_id": 200 + i,
        }
        for i, group in enumerate(children)
    ]
    source = draw(st.sampled_from(["telegram_dm", "web_dm", "parents_group"]))
    teller = draw(st.integers(min_value=0, max_value=parents - 1))
    asker = draw(st.sampled_from([m["id"] for m in members]))
    fact = f"zq{draw(st.integers(min_value=10**5, max_value=10**9))}"
    return {"members": members, "source": source, "teller": f"p{teller}", "asker": asker, "fact": fact}


def _yaml(members: list[dict[str, Any]], fake: FakeOpenAI) -> str:
    rows = "\n".join(
        "  - {" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in m.items()) + "}"
        for m in members
    )
    return (
        f"members:\n{rows}\nparents_group: {{telegram_chat_id: -1001}}\n"
        f"family_group: {{telegram_chat_id: {GROUP}}}\n" + textwrap.dedent(llm_yaml(fake))
    )


async def _scenario(case: dict[str, Any], fake: FakeOpenAI) -> None:
    from config.loader import load_settings

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "halo-home"
        home.mkdir()
        (home / "halo.yaml").write_text(_yaml(case["members"], fake))
        halo = build_halo(load_settings(home))
        start = len(fake.model_requests)  # the fake serves every example
        try:
            teller = case["teller"]
            where = {
                "telegram_dm": f"telegram:{100 + int(teller[1:])}",
                "web_dm": f"web:{teller}",
                "parents_group": "telegram:-1001",
            }[case["source"]]
            # durable memory of that scope (the /remember command), and its conversation
            kept = await send(halo, teller, where, f"/remember the surprise party is at {case['fact']}")
            assert kept.kind == "command", kept
            assert case["fact"] in await read_memory(halo, halo.settings.paths.memory_file(where))
            # a message the model answers ("remember that …" alone is kept in code, at L0)
            told = await send(halo, teller, where, f"the surprise party is at {case['fact']}: can you help me with it?")
            assert told.kind == "model", told
            before = len(fake.model_requests)
            # the fact did reach a model where it was told, so its absence below means something
            assert any(case["fact"] in fake.prompt_text(r) for r in fake.model_requests[start:before])
            asked = await send(halo, case["asker"], f"telegram:{GROUP}", "halo, where is the surprise party?")
            assert asked.kind in ("model", "guarded"), asked
            await halo.gateway.drain()
            group_prompts = [fake.prompt_text(r) for r in fake.model_requests[before:]]
            assert group_prompts, "the family group's turn reached the model"
            assert not any(case["fact"] in prompt for prompt in group_prompts)
        finally:
            await halo.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=families())
def test_a_parents_private_fact_never_reaches_a_family_group_prompt(case: dict[str, Any]) -> None:
    fake = FakeOpenAI(responder=SafetyScript(reply="I can't share that here.")).start_in_thread()
    try:
        asyncio.run(_scenario(case, fake))
    finally:
        fake.stop()
