"""The MQTT adapter: the family's broker → Observations, with a session that outlives halo.

aiomqtt does not reconnect by itself, so `start` runs one background task that connects,
subscribes and reads, and on any failure waits (exponential backoff with jitter, capped)
and tries again, forever, until `stop`. The client id is fixed and the session persistent
(`clean_session=False`, QoS 1 subscriptions): the broker keeps what was published while
halo was down and hands it over on reconnect.

A payload that cannot be read is counted and logged once per topic per hour; whatever the
sink does with an observation, the loop keeps reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiomqtt

from adapters.mqtt.parse import Malformed, parse
from config.settings import MQTTSettings
from halo.port import Observation, Observations, Outbound, SendFailed

log = logging.getLogger(__name__)

FIRST_PAUSE = 0.5
STOP_WITHIN = 10.0
IN_FLIGHT = 256  # observations handed to the sink and not yet done (it batches them)
LOG_AGAIN_AFTER = 3600.0  # one line per topic per hour for a device that keeps sending junk


class MqttAdapter:
    """Reads home events; never sends (home messages leave through the chat adapters)."""

    name = "mqtt"
    platform = "mqtt"

    def __init__(
        self, settings: MQTTSettings, sink: Observations, *, now: Callable[[], datetime] | None = None
    ) -> None:
        if not settings.host:
            raise ValueError("mqtt.host is not set")
        self.settings = settings
        self.sink = sink
        self.now = now or (lambda: datetime.now(UTC))
        self.connected = asyncio.Event()
        self.messages_seen = 0
        self.messages_handled = 0  # seen and done with (parsed, skipped or handed to the sink)
        self.malformed = 0
        self.sink_errors = 0
        self.connects = 0
        self.last_error: str | None = None  # while not connected: why (cleared on connect)
        self.previous_error: str | None = None  # why the last connection ended or failed
        self.last_connected_at: datetime | None = None
        self.last_message_at: datetime | None = None
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._logged: dict[str, float] = {}  # topic → when its bad payload was last logged
        self._slots = asyncio.Semaphore(IN_FLIGHT)
        self._in_flight: set[asyncio.Task[None]] = set()

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Returns at once; connecting (and reconnecting) happens in the background."""
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name="mqtt")

    async def stop(self) -> None:
        """Stop reading; observations already handed to the sink are finished."""
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.connected.clear()
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=STOP_WITHIN)

    def status(self) -> dict[str, Any]:
        return {
            "connected": self.connected.is_set(),
            "broker": f"{self.settings.host}:{self.settings.port}",
            "client_id": self.settings.client_id,
            "topics": list(self.settings.topics),
            "messages_seen": self.messages_seen,
            "messages_handled": self.messages_handled,
            "malformed": self.malformed,
            "sink_errors": self.sink_errors,
            "connects": self.connects,
            "last_error": self.last_error,
            "previous_error": self.previous_error,
            "last_connected_at": _iso(self.last_connected_at),
            "last_message_at": _iso(self.last_message_at),
        }

    async def send(self, message: Outbound) -> None:
        raise SendFailed(
            "MQTT carries home events in; halo's messages go out through the chat adapters", permanent=True
        )

    # --- the connection loop ---------------------------------------------------------

    async def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                await self._session()
                failures = 0  # the broker closed a good session: reconnect promptly
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # aiomqtt.MqttError, OSError, TLS errors …
                self.last_error = f"{type(exc).__name__}: {exc}"
                if failures == 0:
                    log.warning("MQTT %s: %s; reconnecting", self.status()["broker"], self.last_error)
                failures += 1
            finally:
                self.connected.clear()
            pause = min(self.settings.reconnect_max_seconds, FIRST_PAUSE * 2 ** min(failures, 16))
            pause *= random.uniform(0.5, 1.0)  # jitter: a house full of clients does not reconnect in step
            with contextlib.suppress(TimeoutError):  # not wait_for: 3.11 loses a cancel (test_background_loops_stop)
                async with asyncio.timeout(pause):
                    await self._stopping.wait()

    async def _session(self) -> None:
        async with self._client() as client:
            for topic in self.settings.topics:
                await client.subscribe(self.settings.topic_prefix + topic, qos=1)
            self.connects += 1
            if self.last_error:
                self.previous_error, self.last_error = self.last_error, None
            self.last_connected_at = self.now()
            self.connected.set()
            log.info("MQTT connected to %s as %s", self.status()["broker"], self.settings.client_id)
            async for message in client.messages:
                await self._receive(message)

    def _client(self) -> aiomqtt.Client:
        s = self.settings
        tls_context = None
        if s.tls:
            tls_context = ssl.create_default_context(cafile=str(s.ca_certs) if s.ca_certs else None)
        return aiomqtt.Client(
            s.host or "",
            s.port,
            username=s.username,
            password=s.password.get_secret_value() if s.password else None,
            identifier=s.client_id,
            clean_session=False,
            keepalive=s.keepalive_seconds,
            tls_context=tls_context,
            timeout=10,
        )

    async def _receive(self, message: aiomqtt.Message) -> None:
        """Parse here, in order; hand the observation to the sink without waiting for it, so the
        sink can store a burst in one transaction (it keeps arrival order)."""
        try:
            observation = self._parse(message)
        except BaseException:
            self.messages_handled += 1
            raise
        if observation is None:
            self.messages_handled += 1
            return
        await self._slots.acquire()
        task = asyncio.create_task(self._observe(observation))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _observe(self, observation: Observation) -> None:
        try:
            await self.sink.observe(observation)
        except Exception:
            self.sink_errors += 1
            self._log_once(
                observation.topic, "MQTT %s: handling an observation failed", observation.topic, exc_info=True
            )
        finally:
            self._slots.release()
            self.messages_handled += 1

    def _parse(self, message: aiomqtt.Message) -> Observation | None:
        topic = message.topic.value.removeprefix(self.settings.topic_prefix)
        self.messages_seen += 1
        self.last_message_at = self.now()
        payload = message.payload if isinstance(message.payload, bytes) else str(message.payload).encode()
        try:
            return parse(topic, payload, received_at=self.last_message_at, retained=bool(message.retain))
        except Malformed as exc:
            self.malformed += 1
            self._log_once(topic, "MQTT %s: unreadable payload, skipped (%s)", topic, exc)
            return None

    def _log_once(self, topic: str, msg: str, *args: Any, exc_info: bool = False) -> None:
        now = time.monotonic()
        last = self._logged.get(topic)
        if last is not None and now - last < LOG_AGAIN_AFTER:
            return
        if len(self._logged) > 10_000:  # a flood of distinct topics must not grow this forever
            self._logged.clear()
        self._logged[topic] = now
        log.warning(msg, *args, exc_info=exc_info)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
