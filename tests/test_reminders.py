"""Reminders end to end: who may remind whom (the Cedar matrix), a reminder set in chat and
fired through the real `Delivery` into the Telegram stand-in and into the web inbox with no
model request, a recurring one firing twice on an injected clock, quiet hours holding one,
and a late one after a restart."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from config.family import Family
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.core.times import say_time
from halo.core.turn import Turn
from halo.reminders.service import decide_remind
from halo.reminders.store import PARENTS
from policy import PolicyEngine
from tests.audit_support import audit_events
from tests.conftest import Outbox, llm_yaml
from tests.fakes.llm_server import FakeOpenAI, ToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("on_both_stores")  # halo.db on SQLite, then on PostgreSQL

MATRIX_FAMILY = Family.model_validate(
    {
        "family": {"name": "Sharma", "timezone": "Europe/London"},
        "members": [
            {"id": "wags", "name": "Wags", "role": "parent", "telegram_user_id": 1001},
            {"id": "mom", "name": "Mom", "role": "parent", "telegram_user_id": 1002},
            {"id": "aarav", "name": "Aarav", "role": "child", "age_group": "adolescent", "telegram_user_id": 1003},
            {"id": "tara", "name": "Tara", "role": "child", "age_group": "young_child", "telegram_user_id": 1004},
            {"id": "priya", "name": "Priya", "role": "colleague", "discord_user_id": 2001},
            {"id": "raj", "name": "Raj", "role": "colleague", "discord_user_id": 2002},
        ],
        "owner": "wags",
        "work": {"discord_channel_ids": [3001]},
    }
)
WORK = "discord:3001"

# who → (their own DM, their sibling, a parent); "parents" is asked of each parent
ROLES = {
    "parent": ("mom", "wags"),
    "child": ("tara", "aarav"),
    "adolescent": ("aarav", "tara"),
    "colleague": ("priya", "raj"),
}
# (principal, target, where) → allowed, by default (children_may_remind_parents false)
EXPECTED: dict[tuple[str, str, str], bool] = {}
for role, (me, _sibling) in ROLES.items():
    family_scope = "discord:2001" if role == "colleague" else f"web:{me}"
    for where, _scope in (("family", family_scope), ("work", WORK)):
        for target in ("self", "sibling", "parent", "parents"):
            if role == "parent":
                allowed = True
            elif role in ("child", "adolescent"):
                allowed = target == "self" and where == "family"  # children never act in work channels
            else:
                allowed = where == "work" and target in ("self", "sibling")
            EXPECTED[(role, target, where)] = allowed


def turn_for(policy: PolicyEngine, member_id: str, scope_id: str) -> Turn:
    family = policy.family
    member = family.member(member_id)
    assert member is not None
    scope = resolve_scope(family, scope_id)
    envelope = Envelope(scope.platform, scope, Speaker(member_id, member=member), "/remind …")  # type: ignore[arg-type]
    return Turn(envelope, policy)


@pytest.mark.parametrize(("role", "target", "where"), sorted(EXPECTED))
def test_who_may_remind_whom(role: str, target: str, where: str) -> None:
    policy = PolicyEngine(MATRIX_FAMILY)
    me, sibling = ROLES[role]
    scope = WORK if where == "work" else ("discord:2001" if role == "colleague" else f"web:{me}")
    whom = {"self": me, "sibling": sibling, "parent": "wags", "parents": PARENTS}[target]
    decisions = decide_remind(policy, turn_for(policy, me, scope), whom, False, audit=False)
    assert decisions
    assert all(d.allowed for d in decisions) is EXPECTED[(role, target, where)], [d.reason for d in decisions]


@pytest.mark.parametrize("child", ["tara", "aarav"])
def test_children_may_remind_parents_when_the_family_says_so(child: str) -> None:
    policy = PolicyEngine(MATRIX_FAMILY)
    turn = turn_for(policy, child, f"web:{child}")
    assert all(d.allowed for d in decide_remind(policy, turn, PARENTS, True, audit=False))
    assert all(d.allowed for d in decide_remind(policy, turn, "mom", True, audit=False))
    sibling = decide_remind(policy, turn, "aarav" if child == "tara" else "tara", True, audit=False)
    assert not sibling[0].allowed and "child-reminds-self-only" in sibling[0].policy_ids


async def test_a_refusal_is_audited_and_explained(halo: Any) -> None:
    policy = halo.policy
    decision = decide_remind(policy, turn_for(policy, "aarav", "web:aarav"), "tara", False)[0]
    assert not decision.allowed
    assert "child-reminds-self-only" in decision.policy_ids
    assert any(e.get("action") == "remind" and e.get("allowed") is False for e in await audit_events(halo))


# --- firing ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def clocked(halo: Any) -> Clock:
    clock = Clock()
    assert halo.reminders is not None and halo.reminder_clock is not None
    halo.reminders.clock = clock
    halo.reminder_clock.clock = clock
    return clock


async def say(halo: Any, member_id: str, scope_id: str, text: str) -> str:
    family = halo.policy.family
    member = family.member(member_id)
    scope = resolve_scope(family, scope_id)
    user = str(member.telegram_user_id or member.discord_user_id or member_id)
    reply = await halo.gateway.handle(Envelope(scope.platform, scope, Speaker(user, member=member), text))
    return str(reply.text)


async def test_a_reminder_reaches_the_targets_telegram_dm_with_no_model_request(
    start_telegram: Callable[..., Any], tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start_telegram()
    clock = clocked(halo)
    tg.message(1002, 1002, "/remind aarav in 20m pack your football kit")
    confirmation = (await tg.wait_sent(1002))[0]
    zone = ZoneInfo(halo.settings.family.timezone)
    at = say_time(clock.now + timedelta(minutes=20), zone, clock.now)  # "Sat 28 Nov, 16:10", as everywhere
    assert confirmation == f"OK, I'll remind Aarav {at}: pack your football kit"
    assert await halo.reminder_clock.fire_due() == 0  # not yet
    clock.advance(minutes=20)
    assert await halo.reminder_clock.fire_due() == 1
    texts = await tg.wait_sent(1003)
    assert texts == ["Mom asked me to remind you: pack your football kit"]
    assert await halo.reminder_clock.fire_due() == 0  # never twice
    tg.message(1003, 1003, "/remind in 1h stretch")
    assert (await tg.wait_sent(1003, 2))[1].startswith("OK, I'll remind you ")
    clock.advance(hours=1)
    await halo.reminder_clock.fire_due()
    assert (await tg.wait_sent(1003, 3))[2] == "Reminder: stretch"
    assert fake_llm.model_requests == []


async def test_without_telegram_it_goes_to_the_web_inbox(
    serve_halo: Callable[..., Any], settings_for: Callable[..., Any], fake_llm: FakeOpenAI
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    halo = running.halo
    clock = clocked(halo)
    status, body = await running.chat("/remind aarav tomorrow 7:30 pack your football kit", token="mom-token")
    assert status == 200 and body["reply"].startswith("OK, I'll remind Aarav ")
    reminder = (await halo.reminders.store.list())[0]
    clock.now = reminder.due_at
    assert await halo.reminder_clock.fire_due() == 1

    async def inbox() -> list[str]:
        headers = {"Authorization": "Bearer aarav-token"}
        async with running.http.get(running.url("/api/chat/inbox"), headers=headers) as r:
            assert r.status == 200
            body = await r.json()
        return [m["text"] for m in body["messages"]]

    found = await eventually(inbox, what="the reminder in Aarav's web inbox")
    assert found == ["Mom asked me to remind you: pack your football kit"]
    assert fake_llm.model_requests == []


async def test_a_recurring_reminder_fires_twice_and_schedules_the_next(halo: Any, outbox: Any) -> None:
    clock = clocked(halo)
    reply = await say(halo, "mom", "telegram:1002", "/remind every day 20:00 water the plants")
    assert "every day 20:00" in reply
    first = (await halo.reminders.store.list())[0]
    clock.now = first.due_at
    assert await halo.reminder_clock.fire_due() == 1
    second = (await halo.reminders.store.list())[0]
    assert second.state == "pending" and second.due_at - first.due_at == timedelta(days=1)
    clock.now = second.due_at
    assert await halo.reminder_clock.fire_due() == 1
    await eventually(lambda: outbox.to("telegram:1002") == ["Reminder: water the plants"] * 2)
    third = (await halo.reminders.store.list())[0]
    assert third.fired == 2 and third.due_at - second.due_at == timedelta(days=1)


QUIET = "home:\n  quiet_hours: {start: '22:00', end: '07:00'}\n"


async def test_quiet_hours_hold_a_reminder_until_they_end_unless_urgent(
    fake_llm: FakeOpenAI, settings_for: Callable[..., Any]
) -> None:
    from halo.runtime.app import build_halo

    halo = build_halo(settings_for(llm_yaml(fake_llm) + QUIET))
    try:
        box = Outbox()
        halo.delivery.register("telegram", box)
        clock = clocked(halo)
        await say(halo, "mom", "telegram:1002", "/remind aarav tomorrow 23:00 lights out")
        await say(halo, "mom", "telegram:1002", "/remind! aarav tomorrow 23:00 the dog is out")
        due = (await halo.reminders.store.list())[0].due_at
        clock.now = due
        assert await halo.reminder_clock.fire_due() == 1  # only the urgent one
        await eventually(lambda: box.to("telegram:1003") == ["Mom asked me to remind you: the dog is out"])
        held = [r for r in await halo.reminders.store.list() if r.state == "pending"]
        assert len(held) == 1 and held[0].held
        zone = ZoneInfo(halo.settings.family.timezone)
        assert held[0].due_at.astimezone(zone).strftime("%H:%M") == "07:00"  # the end of quiet hours
        clock.now = held[0].due_at
        assert await halo.reminder_clock.fire_due() == 1
        await eventually(lambda: box.to("telegram:1003")[-1] == "Mom asked me to remind you: lights out")
    finally:
        await halo.close()


async def test_a_reminder_too_late_is_reported_to_whoever_set_it(halo: Any, outbox: Any) -> None:
    clock = clocked(halo)
    await say(halo, "mom", "telegram:1002", "/remind aarav in 20m pack your kit")
    clock.advance(hours=3)  # halo was down far longer than reminders.catch_up_minutes
    assert await halo.reminder_clock.fire_due() == 1
    await eventually(lambda: any("too late" in t for t in outbox.to("telegram:1002")))
    assert outbox.to("telegram:1003") == []
    assert (await halo.reminders.store.list())[0].state == "missed"


async def test_reminders_lists_and_cancels(halo: Any) -> None:
    clocked(halo)
    await say(halo, "mom", "telegram:1002", "/remind aarav tomorrow 7:30 pack your kit")
    await say(halo, "aarav", "telegram:1003", "/remind in 2h homework")
    listing = await say(halo, "aarav", "telegram:1003", "/reminders")
    assert "1. " in listing and "homework" in listing and "from Mom" in listing
    refused = await say(halo, "aarav", "telegram:1003", "/reminders cancel 2")
    assert "Only Mom" in refused
    assert (await say(halo, "aarav", "telegram:1003", "/reminders cancel 1")) == "Cancelled: homework"
    assert "homework" not in await say(halo, "aarav", "telegram:1003", "/reminders")
    refused = await say(halo, "aarav", "telegram:1003", "/remind tara in 1h brush teeth")
    assert refused.startswith("Sorry, you can't set reminders for Tara")


async def test_whoami_says_whom_i_may_remind(halo: Any) -> None:
    text = await say(halo, "aarav", "telegram:1003", "/whoami")
    assert "- remind: yourself (" in text


async def test_the_model_sets_a_reminder_in_plain_words(halo: Any, outbox: Any, fake_llm: FakeOpenAI) -> None:
    clocked(halo)
    fake_llm.tool_calls(ToolCall("set_reminder", {"who": "Aarav", "when": "at 7 tomorrow", "text": "pack his kit"}))
    fake_llm.reply("Done: I'll remind Aarav tomorrow at 07:00.")
    await say(halo, "mom", "telegram:1002", "remind Aarav at 7 tomorrow to pack his kit")
    reminders = await halo.reminders.store.list()
    assert [(r.set_by, r.target, r.text) for r in reminders] == [("mom", "aarav", "pack his kit")]
    assert reminders[0].due_at.astimezone(UTC).minute == 0


async def test_a_parent_sees_and_cancels_every_reminder_over_the_api(
    serve_halo: Callable[..., Any], settings_for: Callable[..., Any], fake_llm: FakeOpenAI
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    await running.chat("/remind aarav tomorrow 7:30 pack your kit", token="mom-token")
    await running.chat("/list add milk", token="aarav-token")
    parent = {"Authorization": "Bearer wags-token"}
    async with running.http.get(running.url("/reminders"), headers=parent) as r:
        assert r.status == 200
        (reminder,) = await r.json()
    assert (reminder["setBy"], reminder["target"], reminder["state"]) == ("mom", "aarav", "pending")
    async with running.http.get(running.url("/reminders"), headers={"Authorization": "Bearer aarav-token"}) as r:
        assert r.status == 403  # a child sees their own through the chat
    async with running.http.delete(running.url(f"/reminders/{reminder['id']}"), headers=parent) as r:
        assert r.status == 200 and (await r.json())["state"] == "cancelled"
    async with running.http.get(running.url("/lists"), headers=parent) as r:
        assert [(i["scopeId"], i["text"]) for i in await r.json()] == [("web:aarav", "milk")]
