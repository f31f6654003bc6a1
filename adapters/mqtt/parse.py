"""MQTT payloads → Observations, for the formats a family's house actually sends.

One function per format, chosen by topic. A payload we cannot read raises `Malformed`
(the adapter counts it and moves on); a topic we deliberately skip (Home Assistant
discovery, a Zigbee2MQTT bridge message) gives None.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from halo.port import Observation

MAX_PAYLOAD_BYTES = 256 * 1024  # a sensor's state is a few hundred bytes; megabytes are a mistake


class Malformed(ValueError):
    """The payload is not what its topic promises (not JSON, binary, far too large)."""


def parse(topic: str, payload: bytes, *, received_at: datetime, retained: bool = False) -> Observation | None:
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise Malformed(f"{len(payload)} bytes (at most {MAX_PAYLOAD_BYTES})")
    if topic.endswith("/config") or (topic.startswith("homeassistant/") and not topic.endswith("/state")):
        return None  # Home Assistant discovery and other HA chatter
    parser = _parser_for(topic)
    found = parser(topic, payload)
    if found is None:
        return None
    source, entity, body, event_id = found
    return Observation(
        topic=topic,
        source=source,
        entity=entity,
        payload=body,
        received_at=received_at,
        retained=retained,
        event_id=event_id,
    )


Parsed = tuple[str, str, dict[str, Any], str | None]  # source, entity, payload, event id


def _parser_for(topic: str) -> Callable[[str, bytes], Parsed | None]:
    levels = topic.split("/")
    if levels[0] == "zigbee2mqtt":
        return zigbee2mqtt
    if topic == "frigate/events":
        return frigate
    if levels[0] == "owntracks" and len(levels) == 4 and levels[3] == "event":
        return owntracks
    if levels[0] == "homeassistant" and len(levels) == 4 and levels[3] == "state":
        return homeassistant
    if levels[:2] == ["halo", "events"] and len(levels) > 2:
        return generic
    return fallback


def _text(payload: bytes) -> str:
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("binary payload, not UTF-8 text") from None
    if "\x00" in text:
        raise Malformed("binary payload (NUL bytes)")
    return text


def _json_object(payload: bytes) -> dict[str, Any]:
    text = _text(payload)
    try:
        value = json.loads(text)
    except ValueError:
        raise Malformed(f"not JSON: {text[:40]!r}") from None
    if not isinstance(value, dict):
        raise Malformed(f"expected a JSON object, got {type(value).__name__}")
    return value


def zigbee2mqtt(topic: str, payload: bytes) -> Parsed | None:
    """`zigbee2mqtt/<friendly name>`: the device's whole state, republished on every change of
    any field (battery, signal): the rules act on a change, not on a repeat."""
    rest = topic.split("/", 1)[1] if "/" in topic else ""
    if not rest or rest.startswith("bridge") or rest.endswith(("/set", "/get", "/availability")):
        return None
    return "zigbee2mqtt", rest, _json_object(payload), None


def frigate(topic: str, payload: bytes) -> Parsed | None:
    """`frigate/events`: new → update… → end for one tracked object, all with the same id:
    one real-world event, so the id is the event id and a rule fires for it once."""
    body = _json_object(payload)
    after = body.get("after")
    if not isinstance(after, dict) or not after.get("id") or not after.get("camera"):
        raise Malformed("a Frigate event needs after.id and after.camera")
    return "frigate", str(after["camera"]), body, f"frigate:{after['id']}"


def owntracks(topic: str, payload: bytes) -> Parsed | None:
    """`owntracks/<user>/<device>/event`: someone entered or left a region. The entity is the
    user; the fields that identify the transition make its event id (redelivery is a repeat)."""
    _, user, device, _ = topic.split("/")
    body = _json_object(payload)
    if body.get("_type") != "transition":
        return None
    body.setdefault("user", user)
    body.setdefault("device", device)
    key = f"{user}/{device}:{body.get('event')}:{body.get('desc')}:{body.get('tst')}"
    return "owntracks", user, body, f"owntracks:{key}"


def homeassistant(topic: str, payload: bytes) -> Parsed | None:
    """`homeassistant/<domain>/<entity>/state` from HA's statestream: plain text ("on"). A
    JSON scalar is unwrapped; the field is `state`."""
    _, domain, entity, _ = topic.split("/")
    text = _text(payload).strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    if isinstance(value, dict | list):
        raise Malformed("statestream state should be a plain value")
    return "homeassistant", f"{domain}.{entity}", {"state": value}, None


def generic(topic: str, payload: bytes) -> Parsed | None:
    """`halo/events/<name>`: any JSON object a family's own script publishes. An `id` field
    makes it an event (fired once per id); without one it is a state, like a sensor."""
    body = _json_object(payload)
    name = topic.split("/", 2)[2]
    event_id = f"halo:{name}:{body['id']}" if body.get("id") is not None else None
    return "halo", name, body, event_id


def fallback(topic: str, payload: bytes) -> Parsed | None:
    """A topic the family subscribed to in `mqtt.topics` that no parser knows: JSON objects as
    they are, anything else as plain text in `state`."""
    text = _text(payload)
    try:
        value = json.loads(text)
    except ValueError:
        value = text.strip()
    body = value if isinstance(value, dict) else {"state": value}
    return "mqtt", topic, body, None


def payload_digest(payload: dict[str, Any]) -> str:
    """A stable digest of a payload, for telling a repeat from a change."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]
