"""Decisions as buttons (issue 35): each decision halo asks for comes with inline buttons, and
a press does what the typed command does, through the same path and policy check. Through the
real python-telegram-bot against the Bot API stand-in: callback_query updates in,
answerCallbackQuery and editMessageReplyMarkup out."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from halo.family.pairing import CODE_ALPHABET, CODE_LENGTH
from halo.inventory import Halo
from halo.port import Observation
from tests.fakes.llm_server import FakeOpenAI, ToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import StartTelegram, adapter_of
from tests.waiting import eventually

WAGS, MOM, AARAV, TARA = 1001, 1002, 1003, 1004
GROUP = -1001234
CODE = re.compile(rf"\b[{CODE_ALPHABET}]{{{CODE_LENGTH}}}\b")
PAIRING_BUTTONS = ["Parent", "Child (young)", "Child (adolescent)", "Colleague", "Deny"]


async def handled(halo: Halo, update: dict[str, Any]) -> None:
    store = adapter_of(halo).store
    await eventually(lambda: store.seen(update["update_id"]), what=f"update {update['update_id']} handled")


async def a_stranger_asks(tg: FakeTelegram, user_id: int = 5555, name: str = "Kiran") -> str:
    tg.message(user_id, tg.user(user_id, name, username="kiran_s"), "hi! who are you?")
    [reply] = await tg.wait_sent(user_id)
    return CODE.search(reply).group()  # type: ignore[union-attr]


async def test_a_join_request_comes_with_buttons_and_one_press_approves(
    start_telegram: StartTelegram, tg: FakeTelegram, home: Path
) -> None:
    halo = await start_telegram()
    code = await a_stranger_asks(tg)
    [to_mom] = await tg.wait_for(lambda: tg.sent_with_buttons(MOM), what="the notice with buttons")
    [to_wags] = await tg.wait_for(lambda: tg.sent_with_buttons(WAGS), what="the notice with buttons")
    assert tg.buttons(to_mom) == PAIRING_BUTTONS == tg.buttons(to_wags)
    assert f"/approve {code}" in to_mom["text"]  # the typed form is still said
    datas = [b["callback_data"] for row in to_mom["reply_markup"]["inline_keyboard"] for b in row]
    assert all(len(d.encode()) <= 64 and code not in d and "approve" not in d for d in datas)

    wags_saw = copy.deepcopy(to_wags["reply_markup"])  # Wags's phone, before it hears of the edit
    press = tg.press(MOM, to_mom, "Child (young)")
    texts = await tg.wait_sent(MOM, 2)
    assert texts[-1].startswith("Approved: Kiran (child, young_child, id kiran)")
    assert "telegram_user_id: 5555" in (home / "halo.yaml").read_text()
    assert (await tg.wait_sent(5555, 2))[-1].startswith("Welcome, Kiran!")
    await handled(halo, press)
    assert tg.answers() == ["Child (young) ✓"]
    assert tg.buttons(to_mom) == []  # removed once decided
    assert tg.buttons(to_wags) == [], "and from the other parent's copy, which can no longer decide anything"

    # a press from the other parent's copy as a client still showed it changes nothing
    late = tg.press(WAGS, to_wags, "Deny", seen=wags_saw)
    await handled(halo, late)
    assert tg.answers()[-1] == "Already decided."
    assert tg.buttons(to_wags) == []
    assert len(tg.sent(WAGS)) == 1  # no /deny ran
    events = [e for e in await halo.audit.tail(50) if e["kind"] == "pairing_approved"]
    assert [(e["by"], e["member_id"]) for e in events] == [("mom", "kiran")]


async def test_a_double_press_changes_nothing(start_telegram: StartTelegram, tg: FakeTelegram, home: Path) -> None:
    halo = await start_telegram()
    await a_stranger_asks(tg)
    [to_mom] = await tg.wait_for(lambda: tg.sent_with_buttons(MOM), what="the notice with buttons")
    first = tg.press(MOM, to_mom, "Deny")
    second = tg.press(MOM, to_mom, "Deny")  # a second tap before the buttons went
    await handled(halo, first)
    await handled(halo, second)
    assert sorted(tg.answers()) == ["Already decided.", "Deny ✓"]
    assert [t for t in tg.texts(MOM) if t.startswith("Denied")] == [
        "Denied: Kiran, @kiran_s will not hear from me again."
    ]
    assert [e["kind"] for e in await halo.audit.tail(50)].count("pairing_denied") == 1


async def test_a_childs_press_on_a_parents_button_is_refused_and_audited(
    start_telegram: StartTelegram, tg: FakeTelegram, home: Path
) -> None:
    halo = await start_telegram()
    await a_stranger_asks(tg)
    [to_mom] = await tg.wait_for(lambda: tg.sent_with_buttons(MOM), what="the notice with buttons")
    before = (home / "halo.yaml").read_text()

    press = tg.press(AARAV, to_mom, "Parent")  # a press that claims to be Aarav's
    await handled(halo, press)

    assert tg.answers() == ["Sorry, this decision is not yours to make."]
    assert (home / "halo.yaml").read_text() == before
    assert tg.buttons(to_mom) == PAIRING_BUTTONS  # still Mom's to decide
    [refused] = [e for e in await halo.audit.tail(50) if e["kind"] == "button_refused"]
    assert refused["member"] == "aarav" and refused["platform_user_id"] == str(AARAV)

    tg.press(MOM, to_mom, "Colleague")  # and Mom still can
    assert (await tg.wait_sent(MOM, 2))[-1].startswith("Approved: Kiran (colleague")


async def test_a_tool_approval_is_approved_with_a_button(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start_telegram(background=True)
    fake_llm.tool_calls(ToolCall("message_member", {"member": "mom", "text": "I'll be home late"}))
    fake_llm.reply("I've asked a parent to OK it; I'll tell you here.")
    tg.message(AARAV, AARAV, "tell mom I'll be home late")
    await tg.wait_sent(AARAV)
    [to_wags] = await tg.wait_for(lambda: tg.sent_with_buttons(WAGS), what="the question with buttons")
    assert tg.buttons(to_wags) == ["Approve", "Deny"]
    calls = len(fake_llm.model_requests)

    tg.press(WAGS, to_wags, "Approve")

    assert (await tg.wait_sent(WAGS, 2))[1] == "Done: I passed the message on to Mom."
    assert "Message from Aarav: I'll be home late" in await tg.wait_sent(MOM, 2)
    assert (await tg.wait_sent(AARAV, 2))[1] == "Wags said yes. I passed the message on to Mom."
    assert len(fake_llm.model_requests) == calls  # taken in code, as a typed "yes" is
    await tg.wait_for(lambda: tg.buttons(to_wags) == [], what="the buttons removed")
    assert halo is not None


@pytest.mark.parametrize(("label", "said"), [("Deny", "Understood: I did not")])
async def test_a_tool_approval_is_denied_with_a_button(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI, label: str, said: str
) -> None:
    await start_telegram(background=True)
    fake_llm.tool_calls(ToolCall("message_member", {"member": "mom", "text": "I'll be home late"}))
    fake_llm.reply("I've asked a parent to OK it; I'll tell you here.")
    tg.message(AARAV, AARAV, "tell mom I'll be home late")
    await tg.wait_sent(AARAV)
    [to_mom] = await tg.wait_for(lambda: tg.sent_with_buttons(MOM), what="the question with buttons")
    tg.press(MOM, to_mom, label)
    assert (await tg.wait_sent(MOM, 2))[1].startswith(said)
    assert (await tg.wait_sent(AARAV, 2))[1].startswith("Mom said no")


async def test_a_paused_parents_group_resumes_with_a_button(start_telegram: StartTelegram, tg: FakeTelegram) -> None:
    halo = await start_telegram()
    guest = tg.user(7777, "Guest", username="guest")
    tg.join(GROUP, guest, by=WAGS)
    [notice] = await tg.wait_for(lambda: tg.sent_with_buttons(MOM), what="the notice with buttons")
    assert tg.buttons(notice) == ["Resume"]
    tg.leave(GROUP, guest)
    await eventually(lambda: _no_intruder(halo), what="the guest gone")

    tg.press(MOM, notice, "Resume")

    assert (await tg.wait_sent(MOM, 2))[-1] == "Resumed: I'm back in the parents group."
    assert await halo.groups.suspended_scopes() == []


async def _no_intruder(halo: Halo) -> bool:
    state = await halo.groups._state()
    return not any(state.values())


def clocked(halo: Halo) -> Clock:
    clock = Clock()
    assert halo.reminders is not None and halo.reminder_clock is not None
    halo.reminders.clock = clock
    halo.reminder_clock.clock = clock
    return clock


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.mark.parametrize(
    ("label", "later"),
    [("Snooze 10 min", timedelta(minutes=10)), ("Snooze 1 h", timedelta(hours=1)), ("Tomorrow", timedelta(days=1))],
)
async def test_a_fired_reminder_snoozes_with_a_button(
    start_telegram: StartTelegram, tg: FakeTelegram, label: str, later: timedelta
) -> None:
    halo = await start_telegram()
    clock = clocked(halo)
    tg.message(MOM, MOM, "/remind aarav in 20m pack your football kit")
    await tg.wait_sent(MOM)
    clock.now += timedelta(minutes=20)
    assert halo.reminder_clock is not None and await halo.reminder_clock.fire_due() == 1
    [fired] = await tg.wait_for(lambda: tg.sent_with_buttons(AARAV), what="the reminder with buttons")
    assert fired["text"] == "Mom asked me to remind you: pack your football kit"
    assert tg.buttons(fired) == ["Done", "Snooze 10 min", "Snooze 1 h", "Tomorrow"]

    tg.press(AARAV, fired, label)

    zone = ZoneInfo(halo.settings.family.timezone)
    at = (clock.now + later).astimezone(zone)
    said = (await tg.wait_sent(AARAV, 2))[-1]
    assert said.startswith("OK, I'll remind you ") and said.endswith(f"{at:%H:%M}: pack your football kit")
    await tg.wait_for(lambda: tg.buttons(fired) == [], what="the buttons removed")
    clock.now += later
    assert await halo.reminder_clock.fire_due() == 1
    assert (await tg.wait_sent(AARAV, 3))[-1] == "Reminder: pack your football kit"


async def test_a_fired_reminder_is_marked_done_and_mom_cannot_press_aaravs(
    start_telegram: StartTelegram, tg: FakeTelegram
) -> None:
    halo = await start_telegram()
    clock = clocked(halo)
    tg.message(MOM, MOM, "/remind aarav in 20m pack your football kit")
    await tg.wait_sent(MOM)
    assert halo.reminders is not None
    [reminder] = await halo.reminders.store.list()
    tg.message(AARAV, AARAV, f"/reminders done {reminder.id}")  # typed before it went off
    assert (await tg.wait_sent(AARAV))[-1] == "That reminder has not gone off yet: pack your football kit."
    clock.now += timedelta(minutes=20)
    assert halo.reminder_clock is not None and await halo.reminder_clock.fire_due() == 1
    [fired] = await tg.wait_for(lambda: tg.sent_with_buttons(AARAV), what="the reminder with buttons")

    await handled(halo, tg.press(MOM, fired, "Snooze 1 h"))  # it is Aarav's to snooze
    assert tg.answers() == ["Sorry, this decision is not yours to make."]
    mom_before = len(tg.texts(MOM))
    await handled(halo, tg.press(AARAV, fired, "Done"))
    assert tg.answers()[-1] == "Done ✓" and tg.buttons(fired) == []
    assert (await tg.wait_sent(AARAV, 3))[-1] == "Done: pack your football kit. I told Mom."
    told = (await tg.wait_sent(MOM, mom_before + 1))[-1]
    assert told == "Aarav marked your reminder done: pack your football kit", "whoever set it hears it was done"
    assert await halo.reminder_clock.fire_due() == 0

    tg.message(TARA, TARA, f"/reminders done {reminder.id}")  # typed by someone it was not for
    assert (await tg.wait_sent(TARA))[-1] == "You have no reminder with that number."
    assert len(tg.texts(MOM)) == mom_before + 1, "and nobody is told anything"


async def test_a_home_message_mutes_with_a_button(start_telegram: StartTelegram, tg: FakeTelegram) -> None:
    halo = await start_telegram(HOME_RULES)
    assert halo.home is not None
    await halo.home.observe(GARAGE_OPEN)
    [alert] = await tg.wait_for(lambda: tg.sent_with_buttons(MOM), what="the home message with buttons")
    assert alert["text"] == "The garage door is open." and tg.buttons(alert) == ["Mute 2 h"]

    tg.press(MOM, alert, "Mute 2 h")

    assert (await tg.wait_sent(MOM, 2))[-1].startswith("Muted non-urgent home messages for you until")
    [muted] = [e for e in await halo.audit.tail(50) if e["kind"] == "home_muted"]
    assert muted["member"] == "mom"


HOME_RULES = """\
home:
  rules:
    - id: garage-open
      when: {topic: homeassistant/binary_sensor/garage_door/state, equals: "on"}
      say: "The garage door is open."
      to: [parents]
"""
GARAGE_OPEN = Observation(
    topic="homeassistant/binary_sensor/garage_door/state",
    source="homeassistant",
    entity="binary_sensor.garage_door",
    payload={"state": "on"},
    received_at=datetime.now(UTC),
    event_id="garage-1",
)
