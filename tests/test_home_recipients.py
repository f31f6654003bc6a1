"""A home rule's `to:` names people, and each is reached where they get direct messages: their
Telegram DM, else their Discord DM, else their web inbox. All real: Mosquitto, halo's MQTT
adapter, the home rules, the policy, Delivery, the real python-telegram-bot against the
Telegram stand-in, and the web inbox read over HTTP with the member's own credential."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from admin_api.server import create_app
from config.loader import load_settings
from halo.family.direct import DirectMessages
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import write_home
from tests.fakes.telegram_server import FakeTelegram
from tests.home_support import LEAK, forget_session, mqtt_of, mqtt_yaml, publisher, unique_prefix
from tests.telegram_support import adapter_of, telegram_yaml
from tests.waiting import eventually

# Wags is on Telegram; Nani and Dev use only the web chat; Aarav (a child) only the web chat too
FAMILY = """\
family: {name: Sharma, timezone: Europe/London}
members:
  - {id: wags,  name: Wags,  role: parent, telegram_user_id: 1001, web_token: wags-token}
  - {id: nani,  name: Nani,  role: parent, web_token: nani-token}
  - {id: dev,   name: Dev,   role: parent, discord_user_id: 2002, web_token: dev-token}
  - {id: aarav, name: Aarav, role: child, age_group: adolescent, web_token: aarav-token}
owner: wags
"""

RULES = """\
home:
  rules:
    - id: basement-leak
      when: {topic: zigbee2mqtt/basement_leak, field: water_leak, equals: true}
      say: "Water leak in the basement!"
      to: [parents]
      urgent: true
    - id: chores
      when: {topic: halo/events/chores, field: due, equals: true}
      say: "Chores are due."
      to: [aarav, nani]
      urgent: true
"""


class Running:
    def __init__(self, halo: Halo, tg: FakeTelegram, server: TestServer, http: aiohttp.ClientSession) -> None:
        self.halo, self.tg, self.server, self.http = halo, tg, server, http

    async def handled(self, count: int) -> None:
        """Wait until halo has judged `count` observations and sent what they decided."""
        home = self.halo.home
        assert home is not None
        await eventually(lambda: home.observed >= count, what=f"{count} observation(s) judged")
        await self.halo.delivery.drain()

    async def inbox(self, token: str) -> list[str]:
        headers = {"Authorization": f"Bearer {token}"}
        async with self.http.get(self.server.make_url("/api/chat/inbox"), headers=headers) as response:
            assert response.status == 200, await response.text()
            return [m["text"] for m in (await response.json())["messages"]]


@pytest.fixture
async def running(home: Path) -> AsyncIterator[tuple[Running, Any]]:
    prefix, client_id = unique_prefix(), f"halo-test-{uuid.uuid4().hex[:10]}"
    async with FakeTelegram() as tg, publisher(prefix) as house:
        write_home(home, telegram_yaml(tg.base_url) + mqtt_yaml(prefix, client_id) + RULES, family=FAMILY)
        halo = build_halo(load_settings(home))
        server = TestServer(create_app(halo), host="127.0.0.1")
        await server.start_server()
        http = aiohttp.ClientSession()
        try:
            await halo.start()
            await tg.wait_for(lambda: adapter_of(halo).status()["connected"], what="polling")
            await eventually(lambda: mqtt_of(halo).connected.is_set(), what="MQTT connected")
            yield Running(halo, tg, server, http), house
        finally:
            await http.close()
            await server.close()
            await halo.close()
    await forget_session(client_id)


async def test_to_parents_reaches_a_telegram_parent_on_telegram_and_web_only_parents_in_their_inbox(running):
    r, house = running
    await house.send("zigbee2mqtt/basement_leak", LEAK)

    await r.handled(1)
    assert await r.tg.wait_sent(1001) == ["Water leak in the basement!"]
    assert await r.inbox("nani-token") == ["Water leak in the basement!"]
    # Dev has a Discord account, but halo runs no Discord here: the web inbox it is
    assert await r.inbox("dev-token") == ["Water leak in the basement!"]
    # Wags got it on his phone, once: not a second copy in his web inbox; the child nothing
    assert await r.inbox("wags-token") == []
    assert await r.inbox("aarav-token") == []
    assert r.tg.texts(1001) == ["Water leak in the basement!"]
    assert r.halo.home is not None
    deliveries = {x["id"]: x for x in r.halo.home.rules_report()}["basement-leak"]["deliveries"]
    assert deliveries == {"telegram:1001": "sent", "web:nani": "sent", "web:dev": "sent"}


async def test_a_rule_naming_a_web_only_child_reaches_their_inbox(running):
    r, house = running
    await house.send("halo/events/chores", {"due": True})

    await r.handled(1)
    assert await r.inbox("aarav-token") == ["Chores are due."]
    assert await r.inbox("nani-token") == ["Chores are due."]
    assert r.tg.texts(1001) == []


def test_direct_messages_prefer_telegram_then_discord_then_the_web_inbox(settings_for):
    family = load_settings(write_home(settings_for().paths.home, family=FAMILY)).family_view()
    running: set[str] = set()
    direct = DirectMessages(lambda: family, lambda scope_id: scope_id.partition(":")[0] in running)

    assert direct.scope_of("dev").id == "web:dev"  # type: ignore[union-attr]
    running.add("discord")
    assert direct.scope_of("dev").id == "discord:2002"  # type: ignore[union-attr]
    assert direct.scope_of("wags").id == "web:wags"  # type: ignore[union-attr]
    running.add("telegram")
    assert direct.scope_of("wags").id == "telegram:1001"  # type: ignore[union-attr]
    assert direct.scope_of("nani").id == "web:nani"  # type: ignore[union-attr]
    assert direct.scope_of("nobody") is None
