"""Benchmark: a home event from publish to delivered, through the whole path, against the raw
MQTT round trip through the same broker.

Path measured: aiomqtt publish (QoS 1) → Mosquitto → halo's MQTT adapter → parse →
observation stored in halo.db → home rule → policy → Delivery (transcript) → the Telegram
adapter's outbox → python-telegram-bot → a stand-in Bot API (tests/fakes) receiving
sendMessage. Baseline, measured in the same run: publish → a plain aiomqtt subscriber.
Then a sustained flood of sensor states (most of them repeats, as Zigbee2MQTT sends them),
with the process's RSS sampled, and the count of model requests (a configured model server
that must never be asked).

Needs Mosquitto on 127.0.0.1:1883. Run: `uv run python bench/home_events.py [--events 300] [--flood 5000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiomqtt

from adapters.mqtt import MqttAdapter
from config.loader import load_settings
from halo.runtime.app import build_halo
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.test_telegram import telegram_yaml
from tests.waiting import eventually

HOST, PORT = "127.0.0.1", 1883
GROUP = -1001234
FAMILY = """\
family: {name: Bench}
members:
  - {id: mom, name: Mom, role: parent, telegram_user_id: 1002}
parents_group: {telegram_chat_id: -1001234}
"""
RULES = """\
home:
  burst_limit: 1000000
  rules:
    - id: bench-event
      when: {topic: halo/events/bench, field: ring, equals: true}
      say: "Bench {id}"
      to: [parents_group]
      urgent: true
    - id: freezer-warm
      when: {topic: zigbee2mqtt/+, field: temperature, above: 0}
      say: "{entity} is warm"
      to: [parents_group]
      urgent: true
"""


class TimedTelegram(FakeTelegram):
    """The stand-in Bot API, noting when each text arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: dict[str, float] = {}
        self.waiters: dict[str, asyncio.Future[float]] = {}

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super()._api_sendMessage(params)
        now = time.perf_counter()
        text = params.get("text", "")
        self.arrived[text] = now
        waiter = self.waiters.pop(text, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(now)
        return result

    def expect(self, text: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiters[text] = future
        return future


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * 4096 / 1e6


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def line(name: str, seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    p50, p99 = statistics.median(ms), percentile(ms, 99)
    print(f"{name:<48} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms   (n={len(ms)})")
    return {"p50": p50, "p99": p99}


async def baseline(prefix: str, n: int) -> list[float]:
    """Raw publish → subscribe through the same broker, QoS 1 both ways."""
    topic = f"{prefix}baseline"
    latencies = []
    async with (
        aiomqtt.Client(HOST, PORT, identifier=f"bench-sub-{uuid.uuid4().hex[:8]}") as sub,
        aiomqtt.Client(HOST, PORT, identifier=f"bench-pub-{uuid.uuid4().hex[:8]}") as pub,
    ):
        await sub.subscribe(topic, qos=1)
        messages = sub.messages
        for i in range(n):
            start = time.perf_counter()
            await pub.publish(topic, str(i).encode(), qos=1)
            async for _ in messages:
                break
            latencies.append(time.perf_counter() - start)
    return latencies


async def main(events: int, flood: int) -> None:
    prefix = f"halobench/{uuid.uuid4().hex[:10]}/"
    client_id = f"halo-bench-{uuid.uuid4().hex[:8]}"
    raw = await baseline(prefix, events)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        async with FakeOpenAI() as model, TimedTelegram() as tg:
            mqtt = f'mqtt: {{host: {HOST}, port: {PORT}, client_id: {client_id}, topic_prefix: "{prefix}"}}\n'
            write_home(home, llm_yaml(model) + telegram_yaml(tg.base_url) + mqtt + RULES, family=FAMILY)
            halo = build_halo(load_settings(home))
            await halo.start_adapters()
            adapter = next(a for a in halo.adapters if isinstance(a, MqttAdapter))
            await asyncio.wait_for(adapter.connected.wait(), 10)
            async with aiomqtt.Client(HOST, PORT, identifier=f"bench-house-{uuid.uuid4().hex[:8]}") as house:
                # one event at a time: publish → sendMessage at the stand-in Telegram
                through: list[float] = []
                for i in range(events):
                    arrived = tg.expect(f"Bench e{i}")
                    start = time.perf_counter()
                    payload = json.dumps({"id": f"e{i}", "ring": True}).encode()
                    await house.publish(f"{prefix}halo/events/bench", payload, qos=1)
                    through.append(await asyncio.wait_for(arrived, 10) - start)

                # sustained: 50 sensors reporting, mostly repeats; 1 in 100 crosses the rule
                handled_before = adapter.messages_handled
                rss = [rss_mb()]
                start = time.perf_counter()
                for i in range(flood):
                    warm = i % 100 == 99
                    state = {"temperature": 3.5 if warm else -18, "battery": 90, "linkquality": i % 255}
                    await house.publish(f"{prefix}zigbee2mqtt/freezer_{i % 50}", json.dumps(state).encode(), qos=1)
                    if warm:  # and back to cold, so the next warm reading is a change again
                        cold = json.dumps({**state, "temperature": -18}).encode()
                        await house.publish(f"{prefix}zigbee2mqtt/freezer_{i % 50}", cold, qos=1)
                    if i and i % (flood // 4) == 0:
                        rss.append(rss_mb())
                target = handled_before + flood + flood // 100
                await eventually(lambda: adapter.messages_handled >= target, within=600, what="the flood handled")
                wall = time.perf_counter() - start
                rss.append(rss_mb())
            await halo.close()
            model_requests = len(model.requests)
    print(f"home events benchmark — {events} timed events, {flood} flood messages, broker {HOST}:{PORT}")
    base = line("baseline: raw MQTT publish → subscribe", raw)
    full = line("halo: publish → delivered to stand-in Telegram", through)
    print(f"{'halo overhead over the raw round trip':<48} p50 {full['p50'] - base['p50']:8.2f} ms")
    handled = flood + flood // 100
    print(f"{'sustained: MQTT messages handled':<48} {handled / wall:8.0f} msg/s   ({handled} in {wall:.2f} s)")
    print(f"{'RSS through the flood (MB)':<48} " + " → ".join(f"{r:.1f}" for r in rss))
    print(f"{'model requests':<48} {model_requests}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--flood", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.flood))
