"""Isolation, property-based: no prompt ever carries memory from a scope the policy does not let
that conversation read.

Hypothesis generates a family (two parents, one or two children of either age group and
visibility, a colleague) and a conversation across their DMs, the parents group and a work
channel: facts ("remember …", "my … is …", "note …"), small talk, /share from DMs, /new and
questions about another member. Every fact carries a unique word tagged with the scope it was
said in (and the parents group once shared); every member's USER.md carries one tagged with
them. Distillation runs after every turn, through the real gateway, context builder and Agents
SDK, against the fake OpenAI server over HTTP. Then, for every model request: each tagged word
in the prompt must come from the conversation's own scope or from one the policy allows it to
read (`read_memory`), and each durable fact of the scope must be there (so the check is not
vacuous).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import string
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.family import Member
from config.loader import load_settings
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import default_level_triage, llm_yaml, low_risk_classifier, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_files import read_memory, write_memory

settings.register_profile(
    "memory-isolation",
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TAG = re.compile(r"\b(?:zq|uu)[a-z]{4}\b")
PARENTS_GROUP = "telegram:-1001234"
WORK = "discord:3001"


@dataclass(frozen=True)
class Kid:
    age_group: str
    visible: bool


@dataclass(frozen=True)
class Step:
    who: int  # index into the family's members
    where: int  # index into the family's scopes
    kind: str  # remember | keyed | note | chat | share | new | ask
    about: int = 0  # for "ask": whom the question is about


def family_yaml(kids: list[Kid]) -> str:
    members = [
        "  - {id: p0, name: Pat, role: parent, telegram_user_id: 1001}",
        "  - {id: p1, name: Sam, role: parent, telegram_user_id: 1002}",
    ]
    for i, kid in enumerate(kids):
        members.append(
            f"  - {{id: k{i}, name: Kid{'ABC'[i]}, role: child, age_group: {kid.age_group}, "
            f"parental_visibility: {str(kid.visible).lower()}, telegram_user_id: {1101 + i}}}"
        )
    members.append("  - {id: c0, name: Cole, role: colleague, discord_user_id: 2001}")
    return (
        "family: {name: Test}\nmembers:\n" + "\n".join(members) + "\n"
        f"parents_group: {{telegram_chat_id: {PARENTS_GROUP.split(':')[1]}}}\n"
        f"work: {{discord_channel_ids: [{WORK.split(':')[1]}]}}\n"
    )


def scope_ids(kids: list[Kid]) -> list[str]:
    return ["telegram:1001", "telegram:1002", *(f"telegram:{1101 + i}" for i in range(len(kids))), PARENTS_GROUP, WORK]


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Kid], list[Step]]:
    kids = draw(
        st.lists(st.builds(Kid, st.sampled_from(["young_child", "adolescent"]), st.booleans()), min_size=1, max_size=2)
    )
    n_members, n_scopes = 3 + len(kids), len(scope_ids(kids))
    pg, work = n_scopes - 2, n_scopes - 1
    # where each member usually talks (parents: own DM, the group, work; a child: own DM;
    # the colleague: work), so most steps reach the model; the rest probe refusals
    usual = {0: [0, pg, work], 1: [1, pg, work], n_members - 1: [work]}
    usual.update({2 + i: [2 + i] for i in range(len(kids))})
    kind = st.sampled_from(["remember", "keyed", "note", "chat", "share", "new", "ask", "ask"])
    anywhere = st.builds(
        Step,
        who=st.integers(0, n_members - 1),
        where=st.integers(0, n_scopes - 1),
        kind=kind,
        about=st.integers(0, n_members - 1),
    )
    at_home = st.integers(0, n_members - 1).flatmap(
        lambda who: st.builds(
            Step, who=st.just(who), where=st.sampled_from(usual[who]), kind=kind, about=st.integers(0, n_members - 1)
        )
    )
    step = st.one_of(anywhere, at_home, at_home, at_home)
    return kids, draw(st.lists(step, min_size=6, max_size=16))


def words() -> Iterator[str]:
    for letters in itertools.product(string.ascii_lowercase, repeat=4):
        yield "".join(letters)


@dataclass
class Checked:
    cases: int = 0
    prompts: int = 0
    leaks_checked: int = 0


async def run_case(fake: FakeOpenAI, kids: list[Kid], steps: list[Step], checked: Checked) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        write_home(home, llm_yaml(fake) + "memory: {distillation_every_n_items: 1}\n", family=family_yaml(kids))
        # a family of its own per case: on PostgreSQL (HALO_TEST_STORAGE=postgres) every case shares
        # the test's database, and a family's memory rows are what each of its homes mirrors
        halo = build_halo(load_settings(home, storage={"family_id": f"case-{uuid.uuid4().hex[:12]}"}))
        try:
            await converse(halo, fake, kids, steps, checked)
        finally:
            await halo.close()


async def converse(halo: Halo, fake: FakeOpenAI, kids: list[Kid], steps: list[Step], checked: Checked) -> None:
    family = halo.family
    policy = halo.policy
    members: list[Member] = list(family.members)
    scopes = [resolve_scope(family, s) for s in scope_ids(kids)]
    fresh = words()
    source: dict[str, set[str]] = {}  # tagged word → scope ids (or "member:<id>") it belongs to
    durable: dict[str, set[str]] = {s.id: set() for s in scopes}  # scope → facts that must be remembered

    for member in members:
        word = "uu" + next(fresh)
        source[word] = {f"member:{member.id}"}
        path = halo.settings.paths.user_file(member.id)
        await write_memory(halo, path, await read_memory(halo, path) + f"\n- Secret hobby: {word}\n")

    for step in steps:
        speaker, scope = members[step.who], scopes[step.where]
        word, key = "zq" + next(fresh), "zq" + next(fresh)
        target = None
        text = {
            "remember": f"remember the {word} is in the garage",
            "keyed": f"my {key} is {word}",
            "note": f"we talked about {word} over lunch",
            "chat": f"how are things with {word}",
            "share": f"/share {word} is coming up",
            "new": "/new",
            "ask": "what do you know?",
        }[step.kind]
        if step.kind == "ask":
            target = members[step.about]
        source[word] = {scope.id}
        if step.kind == "keyed":
            source[key] = {scope.id}
        envelope = Envelope(
            platform="discord" if scope.id.startswith("discord") else "telegram",
            scope=scope,
            speaker=Speaker(str(speaker.telegram_user_id or speaker.discord_user_id), speaker, speaker.name),
            text=text,
            target=target,
        )
        before, before_all = len(fake.scripted_requests), len(fake.model_requests)
        reply = await halo.gateway.handle(envelope)
        await halo.gateway.drain()
        if reply.kind in ("denied", "silent"):
            assert len(fake.model_requests) == before_all, "a refused message reached the model"
            continue
        if step.kind in ("remember", "keyed"):
            durable[scope.id].add(word)
        if step.kind == "share" and (reply.text or "").startswith("Shared with the parents"):
            source[word].add(PARENTS_GROUP)
            durable[PARENTS_GROUP].add(word)
        if len(fake.scripted_requests) == before:
            continue  # a command: no model call (a child's is still screened)
        assert len(fake.scripted_requests) == before + 1
        prompt = fake.prompt_text(fake.scripted_requests[-1])
        # a child's turn is also classified: those prompts may hold nothing the reply's may not
        side = [fake.prompt_text(r) for r in fake.model_requests[before_all:] if r.intercepted]
        assert all(set(TAG.findall(p)) <= set(TAG.findall(prompt)) | {word} for p in side)
        checked.prompts += 1

        for found in set(TAG.findall(prompt)):
            origins = source.get(found)
            assert origins is not None, f"unknown tag {found}"
            checked.leaks_checked += 1
            allowed = False
            for origin in origins:
                if origin == scope.id:
                    allowed = True
                    break
                resource = (
                    family.member(origin.split(":", 1)[1])
                    if origin.startswith("member:")
                    else resolve_scope(family, origin)
                )
                decision = policy.decide(
                    "read_memory", principal=speaker, resource=resource, from_scope=scope, audit=False
                )
                if decision.allowed:
                    allowed = True
                    break
            assert allowed, (
                f"{found} from {origins} reached a prompt of {speaker.id} in {scope.id} "
                f"(target {target.id if target else None})"
            )
        missing = {w for w in durable[scope.id] if w != word} - set(TAG.findall(prompt))
        assert not missing, f"facts of {scope.id} missing from its prompt: {missing}"


CHECKED = Checked()


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(default_reply="I see.").start_in_thread()
    fake.interceptors += [low_risk_classifier, default_level_triage]  # children's turns are classified too
    yield fake
    fake.stop()


@settings(settings.get_profile("memory-isolation"))
@given(case=cases())
def _isolation_property(fake: FakeOpenAI, case: tuple[list[Kid], list[Step]]) -> None:
    kids, steps = case
    CHECKED.cases += 1
    fake.requests.clear()
    asyncio.run(run_case(fake, kids, steps, CHECKED))


def test_memory_never_crosses_scopes_the_policy_keeps_apart(fake_server: FakeOpenAI, capsys) -> None:
    _isolation_property(fake_server)
    with capsys.disabled():
        print(
            f"\n[memory isolation] {CHECKED.cases} generated families and conversations, "
            f"{CHECKED.prompts} model prompts checked, {CHECKED.leaks_checked} tagged facts traced"
        )
    assert CHECKED.cases >= 25 and CHECKED.prompts > 0
