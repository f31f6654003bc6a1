"""Home events all the way to Telegram: the real Mosquitto, halo's MQTT adapter and home
rules, Delivery, and the real python-telegram-bot against the fake Bot API. And the model
server, configured and running, is never asked anything."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.audit_support import audit_events
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.home_support import FAMILY_LONDON, LEAK, forget_session, mqtt_of, mqtt_yaml, publisher, unique_prefix
from tests.telegram_support import adapter_of, telegram_yaml
from tests.test_telegram import transcript
from tests.waiting import eventually

RULES = """\
home:
  rules:
    - id: basement-leak
      when: {topic: zigbee2mqtt/basement_leak, field: water_leak, equals: true}
      say: "Water leak in the basement!"
      to: [parents]
      urgent: true
    - id: garage-open
      when: {topic: homeassistant/binary_sensor/garage_door/state, equals: "on"}
      say: "The garage door is open."
      to: [parents]
"""

LEAK_TEXT = "Water leak in the basement!"


@pytest.fixture
async def running(home: Path, fake_llm: FakeOpenAI) -> AsyncIterator[tuple[Halo, FakeTelegram, str]]:
    prefix, client_id = unique_prefix(), f"halo-test-{uuid.uuid4().hex[:10]}"
    async with FakeTelegram() as tg:
        write_home(
            home,
            llm_yaml(fake_llm) + telegram_yaml(tg.base_url) + mqtt_yaml(prefix, client_id) + RULES,
            family=FAMILY_LONDON,
        )
        halo = build_halo(load_settings(home))
        try:
            await halo.start_adapters()
            await tg.wait_for(lambda: adapter_of(halo).status()["connected"], what="polling")
            await eventually(lambda: mqtt_of(halo).connected.is_set(), what="MQTT connected")
            yield halo, tg, prefix
        finally:
            await halo.close()
    await forget_session(client_id)


async def test_a_leak_in_the_basement_reaches_both_parents_on_telegram(running, fake_llm: FakeOpenAI):
    halo, tg, prefix = running
    async with publisher(prefix) as house:
        await house.send("zigbee2mqtt/basement_leak", LEAK)

        assert await tg.wait_sent(1001) == [LEAK_TEXT]
        assert await tg.wait_sent(1002) == [LEAK_TEXT]
        # the outbox writes the transcript once Telegram took the message
        await eventually(lambda: transcript(halo, "telegram:1002") == [("assistant", LEAK_TEXT)], what="transcript")
        assert tg.texts(1003) == [] and tg.texts(1004) == []

        # Mom asks what the house says, then mutes home messages for two hours
        tg.message(1002, tg.user(1002, "Mom"), "/home")
        [_, state] = await tg.wait_sent(1002, count=2)
        assert "basement_leak" in state and "water_leak=True" in state
        tg.message(1002, tg.user(1002, "Mom"), "/mute 2h")
        [*_, muted] = await tg.wait_sent(1002, count=3)
        assert muted.startswith("Muted non-urgent home messages for you until")

        # a child may not see the house
        tg.message(1003, tg.user(1003, "Aarav"), "/home")
        [refused] = await tg.wait_sent(1003)
        assert "parents" in refused and "basement" not in refused

        await house.send("homeassistant/binary_sensor/garage_door/state", "on")
        await tg.wait_sent(1001, count=2)
        await eventually(lambda: halo.home is not None and halo.home.observed == 2, what="the garage handled")
        assert tg.texts(1001)[-1] == "The garage door is open."
        assert len(tg.texts(1002)) == 3  # muted: nothing new for Mom

    kinds = {e["kind"] for e in await audit_events(halo)}
    assert {"home_message", "home_message_muted"} <= kinds
    assert fake_llm.requests == []  # not one model request on this whole path
    status = halo.adapter_status()["mqtt"]  # what /status shows
    assert status["connected"] and status["messages_seen"] == 2 and status["last_error"] is None
