"""Shared pieces of the home-event tests: a clock the test moves, a unique topic prefix on the
real Mosquitto, a publisher, and halo built with MQTT pointed at the broker."""

from __future__ import annotations

import contextlib
import getpass
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiomqtt

from adapters.mqtt import MqttAdapter
from halo.inventory import Halo
from tests import processes
from tests.conftest import free_port

BROKER_HOST = "127.0.0.1"
BROKER_PORT = 1883

FAMILY_LONDON = """\
family: {name: Sharma, timezone: Europe/London}
members:
  - {id: wags,  name: Wags,  role: parent, telegram_user_id: 1001, web_token: wags-token}
  - {id: mom,   name: Mom,   role: parent, telegram_user_id: 1002, web_token: mom-token}
  - {id: aarav, name: Aarav, role: child, age_group: adolescent, telegram_user_id: 1003, web_token: aarav-token}
  - {id: tara,  name: Tara,  role: child, age_group: young_child, telegram_user_id: 1004}
owner: wags
parents_group: {telegram_chat_id: -1001234}
family_group: {telegram_chat_id: -1005555}
"""

RULES = """\
home:
  quiet_hours: {start: "22:00", end: "07:00"}
  burst_limit: 3
  burst_minutes: 5
  rules:
    - id: basement-leak
      when: {topic: zigbee2mqtt/basement_leak, field: water_leak, equals: true}
      say: "Water leak in the basement! (battery {battery}%)"
      to: [parents]
      urgent: true
    - id: front-door-open
      when: {topic: zigbee2mqtt/front_door, field: contact, equals: false, for_minutes: 10}
      say: "The front door has been open for 10 minutes."
      to: [parents]
      cooldown_minutes: 30
    - id: someone-at-the-door
      when: {topic: frigate/events, field: after.label, equals: person}
      say: "Someone is at the door ({after.camera} camera)."
      to: [parents_group]
      urgent: true
    - id: aarav-home
      when: {topic: owntracks/aarav/+/event, field: event, equals: enter}
      say: "Aarav arrived at {desc}."
      to: [parents, aarav]
      urgent: true
    - id: garage-open
      when: {topic: homeassistant/binary_sensor/garage_door/state, equals: "on"}
      say: "The garage door is open."
      to: [parents_group, family_group]
      urgent: true
    - id: doorbell
      when: {topic: halo/events/doorbell, field: pressed, equals: true}
      say: "Doorbell ({id})."
      to: [parents_group]
      urgent: true
    - id: freezer-warm
      when: {topic: zigbee2mqtt/+, field: temperature, above: -10}
      say: "{entity} is warming up: {temperature}°C."
      to: [parents_group]
      urgent: true
"""

LEAK = {"battery": 97, "battery_low": False, "linkquality": 120, "tamper": False, "voltage": 3005, "water_leak": True}


def unique_prefix() -> str:
    return f"halotest/{uuid.uuid4().hex[:12]}/"


def mqtt_yaml(prefix: str, client_id: str, port: int = BROKER_PORT) -> str:
    return f"""\
mqtt:
  host: {BROKER_HOST}
  port: {port}
  client_id: {client_id}
  topic_prefix: "{prefix}"
  reconnect_max_seconds: 0.5
"""


@dataclass
class Clock:
    """The time halo sees: moved by the test, never by waiting."""

    at: datetime

    def now(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


def london(day: int, hour: int, minute: int = 0) -> datetime:
    """A November day in London (UTC+0 then), as an aware UTC time."""
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


class Publisher:
    """The house: publishes under the test's prefix through the real aiomqtt client."""

    def __init__(self, client: aiomqtt.Client, prefix: str) -> None:
        self.client = client
        self.prefix = prefix

    async def send(self, topic: str, payload: Any, *, retain: bool = False, qos: int = 1) -> None:
        import json

        if isinstance(payload, bytes):
            data = payload
        elif isinstance(payload, str):
            data = payload.encode()
        else:
            data = json.dumps(payload).encode()
        await self.client.publish(self.prefix + topic, data, qos=qos, retain=retain)

    async def clear_retained(self, topic: str) -> None:
        await self.client.publish(self.prefix + topic, b"", qos=1, retain=True)


@contextlib.asynccontextmanager
async def publisher(prefix: str, port: int = BROKER_PORT) -> AsyncIterator[Publisher]:
    async with aiomqtt.Client(BROKER_HOST, port, identifier=f"pub-{uuid.uuid4().hex[:10]}") as client:
        yield Publisher(client, prefix)


async def forget_session(client_id: str, port: int = BROKER_PORT) -> None:
    """Drop the persistent session a test left on the shared broker."""
    with contextlib.suppress(aiomqtt.MqttError):
        async with aiomqtt.Client(BROKER_HOST, port, identifier=client_id, clean_session=True):
            pass


def mqtt_of(halo: Halo) -> MqttAdapter:
    return next(a for a in halo.adapters if isinstance(a, MqttAdapter))


class PrivateBroker:
    """A mosquitto of the test's own on a free port, to stop and start (persistence on)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "mosquitto.conf"
        self.config.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"user {getpass.getuser()}\n"  # as root, mosquitto would drop to a user who cannot write here
            f"persistence_location {workdir}/\nautosave_interval 1\n"
        )

    def start(self) -> None:
        binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self.process = processes.popen(
            [binary, "-c", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
