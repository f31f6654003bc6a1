"""Home events end to end against the real Mosquitto: payloads published by the real aiomqtt
client, halo's MQTT adapter, the home rules, the policy and Delivery. What a family member
would get is read from what Delivery handed the Telegram platform (`Outbox`, as in
conftest), and from halo.db and the transcripts. The clock is the test's."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import Outbox, write_home
from tests.home_support import (
    BROKER_PORT,
    FAMILY_LONDON,
    LEAK,
    RULES,
    Clock,
    PrivateBroker,
    Publisher,
    forget_session,
    london,
    mqtt_of,
    mqtt_yaml,
    publisher,
    unique_prefix,
)
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("on_both_stores")  # halo.db on SQLite, then on PostgreSQL

PARENT_DMS = ("telegram:1001", "telegram:1002")
GROUP = "telegram:-1001234"


class House:
    """halo with MQTT on, the clock, the outbox and the publisher of one test."""

    def __init__(self, halo: Halo, clock: Clock, outbox: Outbox, pub: Publisher) -> None:
        self.halo, self.clock, self.outbox, self.pub = halo, clock, outbox, pub

    @property
    def home(self) -> Any:
        assert self.halo.home is not None
        return self.halo.home

    async def publish(self, topic: str, payload: Any, **kw: Any) -> None:
        """Publish and wait until halo has handled it (observed count moved)."""
        adapter = mqtt_of(self.halo)
        before = adapter.messages_handled
        await self.pub.send(topic, payload, **kw)
        await eventually(lambda: adapter.messages_handled > before, what=f"halo to handle {topic}")

    def sent(self, scope_id: str) -> list[str]:
        return self.outbox.to(scope_id)


class Houses:
    """Starts halo (again) on one HALO_HOME and one topic prefix; closes what it started."""

    def __init__(self, home: Path, prefix: str, pub: Publisher | None, port: int = BROKER_PORT) -> None:
        self.home, self.prefix, self.pub, self.port = home, prefix, pub, port
        self.client_ids: list[str] = []
        self.running: list[Halo] = []

    async def __call__(self, rules: str = RULES, at: Any = None, client_id: str | None = None) -> House:
        client_id = client_id or f"halo-test-{uuid.uuid4().hex[:10]}"
        self.client_ids.append(client_id)
        write_home(self.home, mqtt_yaml(self.prefix, client_id, self.port) + rules, family=FAMILY_LONDON)
        halo = build_halo(load_settings(self.home))
        self.running.append(halo)
        clock = Clock(at or london(23, 12))
        assert halo.home is not None
        halo.home.now = clock.now
        outbox = Outbox()
        halo.delivery.register("telegram", outbox)
        await halo.start_adapters()
        await eventually(lambda: mqtt_of(halo).connected.is_set(), what="MQTT connected")
        return House(halo, clock, outbox, self.pub)  # type: ignore[arg-type]

    async def stop(self, house: House) -> None:
        self.running.remove(house.halo)
        await house.halo.close()


@pytest.fixture
async def house(home: Path) -> AsyncIterator[Houses]:
    prefix = unique_prefix()
    async with publisher(prefix) as pub:
        houses = Houses(home, prefix, pub)
        yield houses
        for halo in houses.running:
            await halo.close()
    for client_id in houses.client_ids:
        await forget_session(client_id)


def transcript(halo: Halo, scope_id: str) -> list[tuple[str, str]]:
    store = halo.transcripts
    return [(line.role, line.text) for _, line in store.read_from(scope_id)]


async def test_a_leak_reaches_both_parents_once_and_a_repeat_says_nothing(house):
    h = await house()
    await h.publish("zigbee2mqtt/basement_leak", LEAK)

    expected = "Water leak in the basement! (battery 97%)"
    for dm in PARENT_DMS:
        assert h.sent(dm) == [expected], [(r["id"], r["lastOutcome"]) for r in h.home.rules_report()]
        assert transcript(h.halo, dm) == [("assistant", expected)]
    assert h.sent("telegram:1003") == [] and h.sent(GROUP) == []

    # Zigbee2MQTT republishes the whole state on a battery tick; QoS 1 may redeliver
    await h.publish("zigbee2mqtt/basement_leak", {**LEAK, "battery": 96, "linkquality": 90})
    await h.publish("zigbee2mqtt/basement_leak", {**LEAK, "battery": 96, "linkquality": 90})
    assert [h.sent(dm) for dm in PARENT_DMS] == [[expected], [expected]]

    # dry, then wet again: a change, so a message
    await h.publish("zigbee2mqtt/basement_leak", {**LEAK, "water_leak": False})
    await h.publish("zigbee2mqtt/basement_leak", {**LEAK, "battery": 95})
    assert h.sent("telegram:1002") == [expected, "Water leak in the basement! (battery 95%)"]
    report = {r["id"]: r for r in h.home.rules_report()}["basement-leak"]
    assert report["fired"] == 2 and report["lastFiredAt"] is not None


async def test_retained_state_replayed_at_connect_updates_state_and_says_nothing(house):
    await house.pub.send("zigbee2mqtt/basement_leak", LEAK, retain=True)  # before halo ever ran
    try:
        h = await house()
        await eventually(lambda: h.home.observed >= 1, what="the retained replay")
        states = {s["entity"]: json.loads(s["state"]) for s in await h.home.store.states()}
        assert states["basement_leak"]["water_leak"] is True
        assert "retained" in {r["id"]: r for r in h.home.rules_report()}["basement-leak"]["lastOutcome"]
        # the same state again, live, is a repeat and not news
        await h.publish("zigbee2mqtt/basement_leak", LEAK)
        assert h.sent("telegram:1001") == []
        # a real change is
        await h.publish("zigbee2mqtt/basement_leak", {**LEAK, "water_leak": False})
        await h.publish("zigbee2mqtt/basement_leak", LEAK)
        assert h.sent("telegram:1001") == ["Water leak in the basement! (battery 97%)"]
    finally:
        await house.pub.clear_retained("zigbee2mqtt/basement_leak")


async def test_frigate_new_update_end_fold_into_one_message_per_event(house):
    h = await house()
    event = {
        "id": "1763925600.123456-ab12cd",
        "camera": "driveway",
        "label": "person",
        "score": 0.86,
        "top_score": 0.88,
        "false_positive": False,
        "end_time": None,
        "entered_zones": ["porch"],
        "current_zones": ["porch"],
        "has_snapshot": True,
    }
    for kind in ("new", "update", "update", "end"):
        await h.publish("frigate/events", {"type": kind, "before": event, "after": {**event, "type": kind}})
    await h.publish("frigate/events", {"type": "new", "before": {}, "after": {**event, "id": "x-2", "label": "car"}})

    assert h.sent(GROUP) == ["Someone is at the door (driveway camera)."]
    assert [dm for dm in PARENT_DMS if h.sent(dm)] == []
    rows = await h.home.store.recent(entity="driveway")
    assert sorted(r["event_id"] for r in rows) == ["frigate:1763925600.123456-ab12cd", "frigate:x-2"]
    assert json.loads(next(r for r in rows if r["event_id"].endswith("ab12cd"))["state"])["type"] == "end"

    await h.publish("frigate/events", {"type": "new", "before": {}, "after": {**event, "id": "x-3"}})
    assert h.sent(GROUP) == ["Someone is at the door (driveway camera)."] * 2


async def test_each_source_format_reaches_its_rule(house):
    h = await house()
    await h.publish(
        "owntracks/aarav/phone/event",
        {"_type": "transition", "event": "enter", "desc": "Home", "tid": "AA", "lat": 51.5, "tst": 1763925600},
    )
    await h.publish("homeassistant/binary_sensor/garage_door/state", "on")
    await h.publish("halo/events/doorbell", {"id": "ring-1", "pressed": True})
    await h.publish("halo/events/doorbell", {"id": "ring-1", "pressed": True})  # a QoS 1 redelivery
    await h.publish("zigbee2mqtt/kitchen_freezer", {"temperature": -18})
    await h.publish("zigbee2mqtt/kitchen_freezer", {"temperature": -4.5})

    assert h.sent("telegram:1003") == ["Aarav arrived at Home."]  # the rule names Aarav
    assert h.sent("telegram:1001") == ["Aarav arrived at Home."]
    assert h.sent("telegram:1004") == []  # Tara is not named
    assert h.sent("telegram:-1005555") == ["The garage door is open."]  # the family group
    assert h.sent(GROUP) == [
        "The garage door is open.",
        "Doorbell (ring-1).",
        "kitchen_freezer is warming up: -4.5°C.",
    ]


async def test_for_minutes_waits_and_is_cancelled_when_the_door_closes(house):
    h = await house(at=london(23, 12))
    door = {"contact": False, "battery": 91, "linkquality": 84, "voltage": 2995}
    await h.publish("zigbee2mqtt/front_door", door)
    h.clock.advance(minutes=9)
    await h.home.tick()
    assert h.sent("telegram:1001") == []
    h.clock.advance(minutes=1)
    await h.home.tick()
    assert h.sent("telegram:1001") == ["The front door has been open for 10 minutes."]
    await h.home.tick()
    assert len(h.sent("telegram:1001")) == 1

    # closed and opened again within the cooldown: held, then refused by the cooldown
    await h.publish("zigbee2mqtt/front_door", {**door, "contact": True})
    await h.publish("zigbee2mqtt/front_door", door)
    h.clock.advance(minutes=10)
    await h.home.tick()
    assert len(h.sent("telegram:1001")) == 1
    assert "cooldown" in {r["id"]: r for r in h.home.rules_report()}["front-door-open"]["lastOutcome"]

    # after the cooldown: opened, closed after 3 minutes → nothing, ever
    await h.publish("zigbee2mqtt/front_door", {**door, "contact": True})
    h.clock.advance(minutes=30)
    await h.publish("zigbee2mqtt/front_door", door)
    h.clock.advance(minutes=3)
    await h.publish("zigbee2mqtt/front_door", {**door, "contact": True})
    h.clock.advance(minutes=20)
    await h.home.tick()
    assert len(h.sent("telegram:1001")) == 1
    assert "cancelled" in {r["id"]: r for r in h.home.rules_report()}["front-door-open"]["lastOutcome"]


async def test_equals_false_fires_on_json_false_only_not_on_falsy_values_or_the_text(house):
    h = await house(at=london(23, 12))
    await h.publish("zigbee2mqtt/front_door", {"contact": True})
    for falsy in (0, 0.0, [], "false"):
        await h.publish("zigbee2mqtt/front_door", {"contact": falsy})
        h.clock.advance(minutes=10)
        await h.home.tick()
        assert [h.sent(dm) for dm in PARENT_DMS] == [[], []], falsy
    await h.publish("zigbee2mqtt/front_door", {"contact": False})
    h.clock.advance(minutes=10)
    await h.home.tick()
    assert [h.sent(dm) for dm in PARENT_DMS] == [["The front door has been open for 10 minutes."]] * 2


async def test_quiet_hours_hold_the_door_until_morning_but_not_the_leak(house):
    h = await house(at=london(23, 22, 30))
    door = {"contact": False, "battery": 91}
    await h.publish("zigbee2mqtt/front_door", door)
    h.clock.advance(minutes=10)
    await h.home.tick()
    assert h.sent("telegram:1001") == []  # 22:40: quiet
    assert await h.home.store.pending() == 2  # one per parent

    await h.publish("zigbee2mqtt/basement_leak", LEAK)  # urgent: now, at night
    assert h.sent("telegram:1001") == ["Water leak in the basement! (battery 97%)"]

    await h.publish("zigbee2mqtt/front_door", {**door, "contact": True})
    h.clock.advance(minutes=31)
    await h.publish("zigbee2mqtt/front_door", door)
    h.clock.advance(minutes=10)
    await h.home.tick()  # 23:21: a second one waits too
    h.clock.at = london(24, 6, 59)
    await h.home.tick()
    assert len(h.sent("telegram:1002")) == 1
    h.clock.at = london(24, 7, 0)
    await h.home.tick()
    merged = "Home, while it was quiet (2):\n• The front door has been open for 10 minutes. (×2)"
    for dm in PARENT_DMS:
        assert h.sent(dm)[-1] == merged and len(h.sent(dm)) == 2
    assert await h.home.store.pending() == 0


async def test_a_burst_from_one_rule_becomes_one_summary(house):
    h = await house()
    for n in range(7):
        await h.publish("halo/events/doorbell", {"id": f"ring-{n}", "pressed": True})
    assert h.sent(GROUP) == [f"Doorbell (ring-{n})." for n in range(3)]  # burst_limit: 3
    h.clock.advance(minutes=5)
    await h.home.tick()
    summary = h.sent(GROUP)[-1]
    assert len(h.sent(GROUP)) == 4
    assert summary.startswith("Home: 4 events in a short time:")
    assert all(f"Doorbell (ring-{n})." in summary for n in range(3, 7))


CHILD_RULES = """\
home:
  rules:
    - id: to-aarav-dm-by-scope
      when: {topic: halo/events/chores, field: due, equals: true}
      say: "Chores are due."
      to: ["telegram:1003"]
      urgent: true
    - id: to-aarav-by-name
      when: {topic: halo/events/chores, field: due, equals: true}
      say: "Aarav: chores are due."
      to: [aarav]
      urgent: true
"""


async def test_the_policy_refuses_a_childs_dm_the_rule_does_not_name_the_child_for(house):
    h = await house(rules=CHILD_RULES)
    await h.publish("halo/events/chores", {"due": True})

    assert h.sent("telegram:1003") == ["Aarav: chores are due."]
    report = {r["id"]: r for r in h.home.rules_report()}
    assert report["to-aarav-dm-by-scope"]["deliveries"] == {
        "telegram:1003": "refused by policy (proactive-not-to-children)"
    }
    assert report["to-aarav-by-name"]["deliveries"] == {"telegram:1003": "sent"}


async def test_a_flood_of_malformed_payloads_is_counted_logged_once_and_stops_nothing(house, caplog):
    h = await house()
    caplog.set_level(logging.WARNING, logger="adapters.mqtt.adapter")
    adapter = mqtt_of(h.halo)
    junk = [b"not json {", b"\xff\xfe\x00binary", b"[1, 2, 3]", b'{"a": 1' + b" " * 300_000 + b"}"]
    base = adapter.messages_handled
    for i in range(200):
        await h.pub.send("zigbee2mqtt/basement_leak", junk[i % 3] if i % 50 else junk[3])
    await h.pub.send("zigbee2mqtt/basement_leak", LEAK)
    await eventually(lambda: adapter.messages_handled >= base + 201, what="the flood and the leak handled")

    assert h.sent("telegram:1001") == ["Water leak in the basement! (battery 97%)"]
    assert adapter.status()["malformed"] == 200 and adapter.status()["connected"]
    logged = [r for r in caplog.records if "unreadable payload" in r.getMessage()]
    assert len(logged) == 1


async def test_halo_restarted_while_an_event_was_published_still_hears_it(house):
    client_id = f"halo-test-{uuid.uuid4().hex[:10]}"
    first = await house(client_id=client_id)
    await house.stop(first)  # halo is down; the broker keeps its session

    await house.pub.send("zigbee2mqtt/basement_leak", LEAK)  # QoS 1, nobody connected
    again = await house(client_id=client_id)
    await eventually(lambda: again.home.observed, what="the leak published while halo was down")
    for dm in PARENT_DMS:
        assert again.sent(dm) == ["Water leak in the basement! (battery 97%)"]


@pytest.mark.slow  # starts a process
async def test_a_broker_restart_is_survived_and_what_was_queued_for_halo_arrives(home, tmp_path):
    broker = PrivateBroker(tmp_path / "broker")
    broker.start()
    houses = Houses(home, unique_prefix(), None, port=broker.port)
    try:
        h = await houses()
        adapter = mqtt_of(h.halo)
        broker.stop()  # the broker goes away under a connected halo
        await eventually(lambda: not adapter.connected.is_set(), what="halo noticing the broker is gone")
        await eventually(lambda: adapter.status()["last_error"], what="the reason in status()")
        broker.start()
        await eventually(lambda: adapter.connected.is_set(), what="halo reconnecting on its own")
        status = adapter.status()
        assert status["connects"] == 2 and status["last_error"] is None and status["previous_error"]
        async with publisher(houses.prefix, broker.port) as pub:
            await pub.send("zigbee2mqtt/basement_leak", LEAK)
        await eventually(lambda: h.home.observed, what="the leak after the broker came back")
        assert [h.sent(dm) for dm in PARENT_DMS] == [["Water leak in the basement! (battery 97%)"]] * 2

        # halo down, an event queued for its session, the broker restarted: still delivered
        await houses.stop(h)
        async with publisher(houses.prefix, broker.port) as pub:
            await pub.send("zigbee2mqtt/basement_leak", {**LEAK, "water_leak": False})
            await pub.send("halo/events/doorbell", {"id": "while-down", "pressed": True})
        broker.stop()
        broker.start()
        again = await houses(client_id=houses.client_ids[0])
        await eventually(lambda: again.sent(GROUP), what="the doorbell queued across both restarts")
        assert again.sent(GROUP) == ["Doorbell (while-down)."]
    finally:
        for halo in houses.running:
            await halo.close()
        broker.stop()


async def test_no_broker_configured_means_no_mqtt_and_no_error(settings_for):
    halo = build_halo(settings_for())
    try:
        assert not any(a.platform == "mqtt" for a in halo.adapters)
        assert halo.home is not None and halo.home.rules == []
    finally:
        await halo.close()


async def test_admin_api_shows_observations_and_why_each_rule_did_or_did_not_fire(house):
    from aiohttp import ClientSession
    from aiohttp.test_utils import TestServer

    from admin_api.server import create_app

    h = await house(rules=CHILD_RULES)
    await h.publish("halo/events/chores", {"due": True})
    server = TestServer(create_app(h.halo), host="127.0.0.1")
    await server.start_server()
    try:
        async with ClientSession() as http:
            url = str(server.make_url("/home/rules"))
            parent = {"Authorization": "Bearer mom-token"}
            async with http.get(url, headers=parent) as r:
                rules = {rule["id"]: rule for rule in (await r.json())["rules"]}
            async with http.get(str(server.make_url("/home/observations")), headers=parent) as r:
                seen = await r.json()
    finally:
        await server.close()
    refused = rules["to-aarav-dm-by-scope"]
    assert refused["lastFiredAt"] and "refused by policy (proactive-not-to-children)" in refused["lastOutcome"]
    assert rules["to-aarav-by-name"]["deliveries"] == {"telegram:1003": "sent"}
    assert seen["states"] == [
        {
            "source": "halo",
            "entity": "chores",
            "topic": "halo/events/chores",
            "state": {"due": True},
            "updatedAt": seen["states"][0]["updatedAt"],
        }
    ]
    assert [o["entity"] for o in seen["observations"]] == ["chores"]


async def test_doctor_logs_in_and_subscribes_or_says_what_to_fix(settings_for):
    from halo.runtime.doctor import check_mqtt
    from tests.conftest import free_port

    good = await check_mqtt(settings_for(mqtt_yaml(unique_prefix(), "halo-doctor-test")))
    assert good is not None and good.ok and "subscribed" in good.detail
    bad = await check_mqtt(settings_for(mqtt_yaml(unique_prefix(), "halo-doctor-test", port=free_port())))
    assert bad is not None and not bad.ok and "unreachable" in bad.detail and "mqtt.host" in bad.fix
    assert await check_mqtt(settings_for()) is None  # no broker configured: nothing to check


MOM_QUIET = """\
home:
  member_quiet_hours: {mom: {start: "12:00", end: "13:00"}}
  rules:
    - id: garage-open
      when: {topic: homeassistant/binary_sensor/garage_door/state, equals: "on"}
      say: "The garage door is open."
      to: [parents, parents_group]
"""


async def test_a_members_own_quiet_hours_hold_only_their_messages(house):
    h = await house(rules=MOM_QUIET, at=london(23, 12, 30))
    await h.publish("homeassistant/binary_sensor/garage_door/state", "on")
    assert h.sent("telegram:1001") == ["The garage door is open."]  # Wags: no quiet hours
    assert h.sent(GROUP) == ["The garage door is open."]
    assert h.sent("telegram:1002") == []  # Mom's lunch-time quiet
    h.clock.at = london(23, 13, 0)
    await h.home.tick()
    assert h.sent("telegram:1002") == ["The garage door is open."]


RESTART_RULES = """\
home:
  quiet_hours: {start: "22:00", end: "07:00"}
  rules:
    - id: back-door-open
      when: {topic: zigbee2mqtt/back_door, field: contact, equals: false}
      say: "The back door is open."
      to: [parents]
      cooldown_minutes: 30
"""
BACK_DOOR = {"contact": False, "battery": 91}


async def test_a_restart_within_the_cooldown_does_not_repeat_the_alert(house):
    first = await house(rules=RESTART_RULES, at=london(23, 12))
    await first.publish("zigbee2mqtt/back_door", BACK_DOOR)
    assert first.sent("telegram:1001") == ["The back door is open."]
    await house.stop(first)

    again = await house(rules=RESTART_RULES, at=london(23, 12, 10))  # a new halo on the same HALO_HOME
    report = {r["id"]: r for r in again.home.rules_report()}["back-door-open"]
    assert report["lastFiredAt"] == london(23, 12).isoformat()  # what it last did survived too
    await again.publish("zigbee2mqtt/back_door", {**BACK_DOOR, "contact": True})
    await again.publish("zigbee2mqtt/back_door", BACK_DOOR)  # opened again, 10 minutes later
    assert again.sent("telegram:1001") == []
    assert "cooldown" in {r["id"]: r for r in again.home.rules_report()}["back-door-open"]["lastOutcome"]
    # the same event after the restart, as a redelivery, is a repeat: nothing either
    await again.publish("zigbee2mqtt/back_door", BACK_DOOR)
    assert again.sent("telegram:1001") == []

    again.clock.advance(minutes=31)  # past the cooldown: a new opening is news again
    await again.publish("zigbee2mqtt/back_door", {**BACK_DOOR, "contact": True})
    await again.publish("zigbee2mqtt/back_door", BACK_DOOR)
    assert again.sent("telegram:1001") == ["The back door is open."]


async def test_a_message_held_for_quiet_hours_is_delivered_after_a_restart(house):
    night = await house(rules=RESTART_RULES, at=london(23, 22, 30))
    await night.publish("zigbee2mqtt/back_door", BACK_DOOR)
    assert night.sent("telegram:1001") == []
    assert await night.home.store.pending() == 2  # one per parent, in halo.db
    await house.stop(night)

    morning = await house(rules=RESTART_RULES, at=london(24, 6, 59))
    await morning.home.tick()
    assert morning.sent("telegram:1001") == []  # still quiet
    morning.clock.at = london(24, 7, 0)
    await morning.home.tick()
    for dm in PARENT_DMS:
        assert morning.sent(dm) == ["The back door is open."]
    assert await morning.home.store.pending() == 0


async def test_a_restart_in_the_middle_of_a_burst_does_not_let_the_rest_through_one_by_one(house):
    first = await house()
    for n in range(5):
        await first.publish("halo/events/doorbell", {"id": f"ring-{n}", "pressed": True})
    assert len(first.sent(GROUP)) == 3  # burst_limit: 3; the rest collect for one summary
    await house.stop(first)

    again = await house(at=london(23, 12, 1))
    for n in range(5, 7):
        await again.publish("halo/events/doorbell", {"id": f"ring-{n}", "pressed": True})
    assert again.sent(GROUP) == []  # they join the summary still collecting in halo.db
    again.clock.advance(minutes=5)
    await again.home.tick()
    [summary] = again.sent(GROUP)
    assert summary.startswith("Home: 4 events in a short time:")
    assert all(f"Doorbell (ring-{n})." in summary for n in range(3, 7))
