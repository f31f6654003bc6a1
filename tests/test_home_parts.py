"""The pieces of home events that need no broker: payload parsers, rule matching, quiet
hours, and the config checks that stop start-up on a bad rule."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from adapters.mqtt.parse import MAX_PAYLOAD_BYTES, Malformed, parse
from config.home import QuietHours, When
from config.loader import ConfigError, load_settings
from halo.home.rules import condition_holds, render, topic_matches
from tests.conftest import write_home

pytestmark = pytest.mark.usefixtures("on_both_stores")  # halo.db on SQLite, then on PostgreSQL

AT = datetime(2026, 11, 23, 12, tzinfo=UTC)


def test_each_format_becomes_an_observation():
    z2m = parse("zigbee2mqtt/front_door", b'{"contact":false,"battery":91}', received_at=AT)
    assert (z2m.source, z2m.entity, z2m.payload["contact"], z2m.event_id) == ("zigbee2mqtt", "front_door", False, None)

    frigate = parse(
        "frigate/events",
        b'{"type":"update","after":{"id":"1763925600.123456-ab12cd","camera":"driveway","label":"person"}}',
        received_at=AT,
    )
    assert (frigate.source, frigate.entity, frigate.event_id) == (
        "frigate",
        "driveway",
        "frigate:1763925600.123456-ab12cd",
    )

    ot = parse(
        "owntracks/aarav/phone/event",
        b'{"_type":"transition","event":"enter","desc":"Home","tid":"AA","tst":1763925600}',
        received_at=AT,
    )
    assert (ot.source, ot.entity, ot.payload["event"]) == ("owntracks", "aarav", "enter")
    assert ot.event_id == "owntracks:aarav/phone:enter:Home:1763925600"

    ha = parse("homeassistant/binary_sensor/garage_door/state", b"on", received_at=AT, retained=True)
    assert (ha.source, ha.entity, ha.payload, ha.retained) == (
        "homeassistant",
        "binary_sensor.garage_door",
        {"state": "on"},
        True,
    )
    assert parse("homeassistant/sensor/temp/state", b"21.5", received_at=AT).payload == {"state": 21.5}

    generic = parse("halo/events/doorbell", b'{"id": 7, "pressed": true}', received_at=AT)
    assert (generic.entity, generic.event_id) == ("doorbell", "halo:doorbell:7")


def test_discovery_bridge_and_non_transition_messages_are_skipped():
    assert parse("homeassistant/binary_sensor/garage_door/config", b'{"name": "x"}', received_at=AT) is None
    assert parse("zigbee2mqtt/bridge/state", b'{"state":"online"}', received_at=AT) is None
    assert parse("owntracks/aarav/phone/event", b'{"_type":"location"}', received_at=AT) is None


@pytest.mark.parametrize(
    ("topic", "payload"),
    [
        ("zigbee2mqtt/front_door", b"not json"),
        ("zigbee2mqtt/front_door", b"\xff\xfe\x00\x01"),
        ("zigbee2mqtt/front_door", b"[1, 2]"),
        ("zigbee2mqtt/front_door", b"{" + b" " * MAX_PAYLOAD_BYTES + b"}"),
        ("frigate/events", b'{"type": "new"}'),
        ("homeassistant/sensor/x/state", b'{"a": 1}'),
    ],
)
def test_unreadable_payloads_are_malformed(topic, payload):
    with pytest.raises(Malformed):
        parse(topic, payload, received_at=AT)


def test_topic_wildcards():
    assert topic_matches("zigbee2mqtt/#", "zigbee2mqtt/a/b")
    assert topic_matches("zigbee2mqtt/#", "zigbee2mqtt")
    assert topic_matches("owntracks/+/+/event", "owntracks/aarav/phone/event")
    assert not topic_matches("owntracks/+/+/event", "owntracks/aarav/event")
    assert not topic_matches("zigbee2mqtt/front_door", "zigbee2mqtt/front_door/set")


def test_comparisons_and_templates():
    payload = {"after": {"label": "person", "camera": "driveway", "zones": ["porch"]}, "temp": "21.5", "on": True}
    assert condition_holds(When(topic="t", field="after.label", equals="person"), payload)
    assert condition_holds(
        When.model_validate({"topic": "t", "field": "after.label", "in": ["car", "person"]}), payload
    )
    assert condition_holds(When(topic="t", field="temp", above=20, below=22), payload)
    assert not condition_holds(When(topic="t", field="temp", below=20), payload)
    assert condition_holds(When(topic="t", field="on", equals=True), payload)
    assert not condition_holds(When(topic="t", field="after.missing", equals=None), payload)
    assert render("{after.camera} sees {after.label} in {after.zones}; {nope}", payload) == (
        "driveway sees person in porch; {nope}"
    )


@pytest.mark.parametrize(
    ("equals", "value", "holds"),
    [
        (False, False, True),
        (False, "false", False),
        (False, 0, False),
        (False, 0.0, False),
        (False, [], False),
        (False, None, False),
        ("false", "false", True),
        ("false", "FALSE ", True),
        ("false", False, False),
        (True, "true", False),
        (True, 1, False),
        (1, True, False),
        (1, 1.0, True),
        (0, False, False),
        ("on", "ON", True),
        ("1", 1, False),
        ([1, "a"], [1.0, "A"], True),
        ([1], [True], False),
        ({"a": 1}, {"a": True}, False),
    ],
)
def test_equals_compares_by_json_type(equals, value, holds):
    """A rule's `equals: false` is JSON false: not the text "false", not 0, not an empty list."""
    assert condition_holds(When(topic="t", field="v", equals=equals), {"v": value}) is holds
    assert condition_holds(When.model_validate({"topic": "t", "field": "v", "in": [equals]}), {"v": value}) is holds


def test_quiet_hours_cross_midnight():
    night = QuietHours(start="22:00", end="07:00")
    assert night.contains(time(23, 30)) and night.contains(time(6, 59))
    assert not night.contains(time(7, 0)) and not night.contains(time(21, 59))


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        ("- {id: a, when: {topic: x/#/y, equals: 1}, say: hi, to: [parents]}", "home.rules.0.when.topic"),
        ("- {id: a, when: {topic: x, field: f}, say: hi, to: [parents]}", "needs one of equals, in, above, below"),
        ("- {id: a, when: {topic: x, equals: 1}, say: 'hi {oops', to: [parents]}", "home.rules.0.say"),
        ("- {id: a, when: {topic: x, equals: 1}, say: hi, to: [grandma]}", "'grandma' (a) is not a member id"),
        ("- {id: a, when: {topic: x, equals: 1}, say: hi, to: [parents], colour: red}", "home.rules.0.colour"),
    ],
)
def test_a_bad_rule_stops_start_up_naming_the_file_and_key(home, rules, problem):
    write_home(home, "home:\n  rules:\n    " + rules + "\n")
    with pytest.raises(ConfigError) as err:
        load_settings(home)
    message = str(err.value)
    assert str(home / "halo.yaml") in message and problem in message
