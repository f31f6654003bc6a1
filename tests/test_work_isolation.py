"""Isolation, property-based: nothing said in a family scope reaches a work channel.

Hypothesis generates a family (one or two parents, some of them on Discord, children of
either age group, one or two colleagues) and an interleaving of family talk — facts said in
the parents' and children's DMs (Telegram and Discord) and in the parents group, some
/shared — with work: tasks managed by command, status questions, plain questions to halo
in the work channel, and the day's digest. Every family fact carries a unique word tagged
"zq". Everything runs through the composition root's real gateway, policy, task list,
memory (distillation after every turn) and Agents SDK against the fake model over HTTP.

Checked: no tagged word appears in any work-channel reply, in the digest, or in any model
request made while a work-channel turn (and its after-turn work) ran; and the work facts do
reach them (so the check is not vacuous).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import string
import tempfile
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

pytestmark = pytest.mark.usefixtures("on_both_stores")  # halo.db on SQLite, then on PostgreSQL

settings.register_profile(
    "work-isolation",
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

FAMILY_TAG = re.compile(r"\bzq[a-z]{4}\b")
WORK = "discord:3001"
PARENTS_GROUP = "telegram:-1001234"


@dataclass(frozen=True)
class Shape:
    parents: int  # 1 or 2
    parents_on_discord: tuple[bool, ...]
    kids: tuple[str, ...]  # age groups
    colleagues: int


@dataclass(frozen=True)
class Step:
    kind: str  # family | share | task | status | ask | digest
    who: int  # a family member (family steps) or a work member (work steps)
    where: int  # for family steps: which family scope
    variant: int


def family_yaml(shape: Shape) -> str:
    lines = []
    for i in range(shape.parents):
        discord = f", discord_user_id: {2101 + i}" if shape.parents_on_discord[i] else ""
        lines.append(f"  - {{id: p{i}, name: Parent{i}, role: parent, telegram_user_id: {1001 + i}{discord}}}")
    for i, age in enumerate(shape.kids):
        lines.append(f"  - {{id: k{i}, name: Kid{i}, role: child, age_group: {age}, telegram_user_id: {1101 + i}}}")
    for i in range(shape.colleagues):
        lines.append(f"  - {{id: c{i}, name: Colleague{i}, role: colleague, discord_user_id: {2001 + i}}}")
    return (
        "family: {name: Test}\nmembers:\n" + "\n".join(lines) + "\n"
        "parents_group: {telegram_chat_id: -1001234}\n"
        'work: {discord_channel_ids: [3001], digest: "daily 17:00"}\n'
    )


def family_scopes(shape: Shape) -> list[tuple[str, int]]:
    """(scope id, index of the member who talks there) for every family scope."""
    found = [(f"telegram:{1001 + i}", i) for i in range(shape.parents)]
    found += [(f"discord:{2101 + i}", i) for i in range(shape.parents) if shape.parents_on_discord[i]]
    found += [(f"telegram:{1101 + i}", shape.parents + i) for i in range(len(shape.kids))]
    found += [(PARENTS_GROUP, i) for i in range(shape.parents)]
    return found


@st.composite
def cases(draw: st.DrawFn) -> tuple[Shape, list[Step]]:
    parents = draw(st.integers(1, 2))
    shape = Shape(
        parents=parents,
        parents_on_discord=tuple(draw(st.lists(st.booleans(), min_size=parents, max_size=parents))),
        kids=tuple(draw(st.lists(st.sampled_from(["young_child", "adolescent"]), max_size=2))),
        colleagues=draw(st.integers(1, 2)),
    )
    step = st.builds(
        Step,
        kind=st.sampled_from(["family", "family", "share", "task", "task", "status", "ask", "digest"]),
        who=st.integers(0, 8),
        where=st.integers(0, 8),
        variant=st.integers(0, 3),
    )
    steps = draw(st.lists(step, min_size=6, max_size=14))
    return shape, [*steps, Step("status", 0, 0, 0), Step("digest", 0, 0, 0)]


def words() -> Iterator[str]:
    for letters in itertools.product(string.ascii_lowercase, repeat=4):
        yield "".join(letters)


@dataclass
class Checked:
    cases: int = 0
    work_replies: int = 0
    work_requests: int = 0
    digests: int = 0


def speaker_of(member: Member, platform: str) -> Speaker:
    user_id = member.discord_user_id if platform == "discord" else member.telegram_user_id
    return Speaker(str(user_id), member, member.name)


async def run_case(fake: FakeOpenAI, shape: Shape, steps: list[Step], checked: Checked) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        write_home(home, llm_yaml(fake) + "memory: {distillation_every_n_items: 1}\n", family=family_yaml(shape))
        halo = build_halo(load_settings(home))
        try:
            await converse(halo, fake, shape, steps, checked)
        finally:
            await halo.close()


async def converse(halo: Halo, fake: FakeOpenAI, shape: Shape, steps: list[Step], checked: Checked) -> None:
    family = halo.family
    members = list(family.members)
    parents = [m for m in members if m.role == "parent"]
    workers = parents + [m for m in members if m.role == "colleague"]
    places = family_scopes(shape)
    fresh = words()
    said: set[str] = set()
    tasks = 0

    async def turn(scope_id: str, member: Member, text: str) -> str | None:
        platform = scope_id.partition(":")[0]
        envelope = Envelope(
            platform=platform,  # type: ignore[arg-type]
            scope=resolve_scope(family, scope_id),
            speaker=speaker_of(member, platform),
            text=text,
        )
        reply = await halo.gateway.handle(envelope)
        await halo.gateway.drain()
        return reply.text

    for step in steps:
        if step.kind in ("family", "share"):
            scope_id, who = places[step.where % len(places)]
            word = "zq" + next(fresh)
            said.add(word)
            text = (
                f"/share the {word} party is on Saturday"
                if step.kind == "share"
                else [
                    f"remember the {word} is in the garage",
                    f"my {word} appointment is on Thursday",
                    f"note: we talked about {word} over lunch",
                    f"how is {word} doing?",
                ][step.variant]
            )
            await turn(scope_id, members[who], text)
            continue
        worker = workers[step.who % len(workers)]
        before = len(fake.requests)
        if step.kind == "digest":
            assert halo.digest is not None
            text = await halo.digest.text()
            checked.digests += 1
        else:
            if step.kind == "task":
                if tasks == 0 or step.variant == 0:
                    tasks += 1
                    message = f"/task add Proj{step.variant}: work item {tasks}"
                else:
                    verb = ["start", "note", "block", "done"][step.variant]
                    message = f"/task {verb} {1 + step.who % tasks} progress on item"
            elif step.kind == "status":
                message = ["how are you doing?", "what are you working on?", "what's blocked?", "status of Proj1?"][
                    step.variant
                ]
            else:
                message = "what should we do next on the project?"
            text = await turn(WORK, worker, message)
            checked.work_replies += 1
        leaked = set(FAMILY_TAG.findall(text or "")) & said
        assert not leaked, f"family facts {leaked} reached the work channel ({step.kind}): {text!r}"
        prompts = [fake.prompt_text(r) for r in fake.requests[before:]]
        if step.kind == "status" and step.variant in (0, 1) and tasks:
            # routed (the default), the task list answers in code; routing off, the model words it
            assert "work item" in (text or "") or any("work item" in p for p in prompts), (
                "a status answer has the tasks"
            )
        for request in fake.requests[before:]:
            checked.work_requests += 1
            prompt = fake.prompt_text(request)
            leaked = set(FAMILY_TAG.findall(prompt)) & said
            assert not leaked, f"family facts {leaked} reached a model request for the work channel ({step.kind})"


CHECKED = Checked()


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(default_reply="I see.").start_in_thread()
    fake.interceptors += [low_risk_classifier, default_level_triage]
    yield fake
    fake.stop()


@settings(settings.get_profile("work-isolation"))
@given(case=cases())
def _isolation_property(fake: FakeOpenAI, case: tuple[Shape, list[Step]]) -> None:
    shape, steps = case
    CHECKED.cases += 1
    fake.requests.clear()
    asyncio.run(run_case(fake, shape, steps, CHECKED))


def test_family_facts_never_reach_a_work_channel(fake_server: FakeOpenAI, capsys) -> None:
    _isolation_property(fake_server)
    with capsys.disabled():
        print(
            f"\n[work isolation] {CHECKED.cases} generated families, {CHECKED.work_replies} work replies, "
            f"{CHECKED.work_requests} work model requests, {CHECKED.digests} digests checked"
        )
    assert CHECKED.cases >= 12 and CHECKED.work_requests > 0 and CHECKED.digests > 0
