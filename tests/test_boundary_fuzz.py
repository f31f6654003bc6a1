"""Generated input at every boundary that takes it from outside (issue 15): the web chat's
body, Telegram's updates, Discord's messages, MQTT payloads. Whatever arrives, halo answers with a clear error or
a reply, keeps running, and loses nothing it accepted.

Each part runs one real halo on its own event loop in a thread (hypothesis drives examples
synchronously) and sends it examples over real sockets; examples and time are bounded.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Coroutine, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from adapters.mqtt.parse import Malformed, parse
from config.loader import load_settings
from halo.inventory import Halo
from halo.port import Observation
from halo.runtime.app import build_halo
from tests.admin.threaded import ThreadedHalo
from tests.conftest import default_level_triage, llm_yaml, low_risk_classifier, write_home
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import COMMENTED_FAMILY, adapter_of, telegram_yaml
from tests.test_discord import adapter_of as discord_adapter_of
from tests.test_discord import discord_yaml
from tests.waiting import eventually

pytestmark = pytest.mark.slow  # halo served from a thread, thousands of generated requests

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SURROGATE = re.compile("[\ud800-\udfff]")

# Any code point at all, lone surrogates included: JSON and Telegram can both carry them.
odd_text = st.text(alphabet=st.characters(codec=None, categories=None), max_size=300)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | odd_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(odd_text, inner, max_size=4),
    max_leaves=20,
)


def user_line(text: str) -> str:
    """What a transcript keeps of `text`: lone surrogates become U+FFFD, the ends are trimmed."""
    return SURROGATE.sub("\ufffd", text).strip()


class LoopThread:
    """An event loop in a daemon thread, so synchronous hypothesis examples can drive async parts."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="fuzz-loop")
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(default_reply="Hello from the fake model")
    fake.interceptors += [low_risk_classifier, default_level_triage]
    fake.start_in_thread()
    yield fake
    fake.stop()


# --- (a) the web chat -------------------------------------------------------------------


@pytest.fixture(scope="module")
def web(model: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedHalo]:
    home = write_home(tmp_path_factory.mktemp("fuzz-web") / "halo-home", llm_yaml(model))
    served = ThreadedHalo(load_settings(home)).start()
    yield served
    served.stop()


async def _post(url: str, data: bytes, content_type: str | None) -> tuple[int, str]:
    headers = {"Authorization": "Bearer mom-token"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    async with aiohttp.ClientSession() as http, http.post(url, data=data, headers=headers) as resp:
        return resp.status, await resp.text()


def _mom_said(served: ThreadedHalo) -> list[str]:
    assert served.halo is not None
    store = served.halo.transcripts
    return [line.text for _, line in store.read_from("web:mom") if line.role == "user"]


bodies = st.one_of(
    st.builds(lambda t: {"text": t}, odd_text),  # what the page sends, with any text
    st.builds(lambda t, extra: {"text": t, **extra}, odd_text, st.dictionaries(odd_text, json_values, max_size=3)),
    json_values,  # any JSON at all
    st.builds(lambda n: {"text": "[" * n + "]" * n}, st.integers(1, 5000)),
)
raw_bodies = st.one_of(
    st.binary(max_size=500),
    st.builds(lambda n: b"[" * n, st.integers(1, 200_000)),  # nesting deep enough to exhaust a parser
    st.builds(lambda n: b'{"text": ' + b"9" * n + b"}", st.integers(1, 10_000)),  # an integer too long
    st.builds(lambda s: json.dumps({"text": s}).encode("utf-8"), odd_text),
)
content_types = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/vnd.api+json",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin-1",
        None,
    ]
)


def _check_web_answer(served: ThreadedHalo, status: int, raw: str, sent: Any) -> None:
    assert status < 500, raw
    body = json.loads(raw)
    assert isinstance(body, dict) and ("error" in body or "reply" in body), raw
    if status == 200:
        assert isinstance(body["reply"], str)
        assert isinstance(sent, dict) and isinstance(sent.get("text"), str)
        assert user_line(sent["text"]) in _mom_said(served), "an answered message is missing from the transcript"
    else:
        assert isinstance(body["error"], str) and body["error"]


@FUZZ
@given(body=bodies)
def _post_any_json_body(web: ThreadedHalo, body: Any) -> None:
    data = json.dumps(body).encode()  # ensure_ascii: lone surrogates travel as \\udXXX escapes
    status, raw = web.run(_post(web.url + "/api/chat", data, "application/json"))
    _check_web_answer(web, status, raw, body)


def test_any_json_body_gets_json_back_and_accepted_text_is_kept(web: ThreadedHalo) -> None:
    _post_any_json_body(web)
    # and the fuzz got past the checks: some generated messages were accepted and kept, so it
    # exercised the whole path and not only the error answers
    assert _mom_said(web)


@FUZZ
@given(data=raw_bodies, content_type=content_types)
def test_any_bytes_under_any_content_type_get_a_clear_answer(
    web: ThreadedHalo, data: bytes, content_type: str | None
) -> None:
    status, raw = web.run(_post(web.url + "/api/chat", data, content_type))
    try:
        sent = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        sent = None
    _check_web_answer(web, status, raw, sent)


# --- (b) Telegram -----------------------------------------------------------------------


class TelegramRig:
    """halo with its Telegram adapter polling the fake Bot API, on a loop of its own."""

    def __init__(self, home: Path, model: FakeOpenAI) -> None:
        self.loop = LoopThread()
        self.tg: FakeTelegram = self.loop.run(FakeTelegram().start())
        write_home(home, llm_yaml(model) + telegram_yaml(self.tg.base_url), family=COMMENTED_FAMILY)
        self.halo: Halo = self.loop.run(self._start(home))

    async def _start(self, home: Path) -> Halo:
        halo = build_halo(load_settings(home))
        await halo.start_adapters()
        await self.tg.wait_for(lambda: adapter_of(halo).status()["connected"], what="polling")
        return halo

    def push(self, update: dict[str, Any]) -> None:
        self.loop.loop.call_soon_threadsafe(self.tg.push, update)

    def sent_to(self, chat_id: int) -> int:
        return len(self.tg.sent(chat_id))

    def wait_sent(self, chat_id: int, count: int) -> None:
        self.loop.run(eventually(lambda: self.sent_to(chat_id) >= count, what=f"{count} message(s) to {chat_id}"))

    def close(self) -> None:
        self.loop.run(self.halo.close())
        self.loop.run(self.tg.close())
        self.loop.stop()


@pytest.fixture(scope="module")
def telegram(model: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TelegramRig]:
    rig = TelegramRig(tmp_path_factory.mktemp("fuzz-telegram") / "halo-home", model)
    yield rig
    rig.close()


WAGS, MOM = 1001, 1002
ids = st.one_of(
    st.sampled_from([1003, 1004, 2001, -1001234, -100999, 0, 7777]),
    st.integers(-(2**70), 2**70),
)
anything = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), odd_text, st.lists(st.integers(), max_size=3)
)
# Shaped as the Bot API promises (its required fields, their types), odd in every value: PTB
# refuses a whole getUpdates batch that breaks the schema, which Telegram itself never sends.
entities = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["mention", "bot_command", "url", "bold", "text_mention", "nonsense"]),
            "offset": st.integers(-5, 5000),
            "length": st.integers(-5, 5000),
        },
        optional={"url": odd_text, "language": odd_text},
    ),
    max_size=4,
)
users = st.fixed_dictionaries(
    {"id": ids, "is_bot": st.booleans(), "first_name": odd_text},
    optional={"username": odd_text, "last_name": odd_text, "language_code": odd_text},
)
chats = st.fixed_dictionaries(
    {"id": ids, "type": st.sampled_from(["private", "group", "supergroup", "channel", "odd"])},
    optional={"title": odd_text, "username": odd_text},
)
odd_messages = st.fixed_dictionaries(
    {"message_id": st.integers(-(2**70), 2**70), "date": st.integers(0, 2**31), "chat": chats},
    optional={
        "from": users,
        "text": st.one_of(odd_text, anything),
        "entities": entities,
        "caption": odd_text,
        "new_chat_members": st.lists(users, max_size=2),
        "unknown_field": anything,
    },
)
odd_updates = st.one_of(
    st.builds(lambda m: {"message": m}, odd_messages),
    st.builds(lambda m: {"edited_message": m}, odd_messages),
    st.builds(lambda m: {"channel_post": m}, odd_messages),
    st.dictionaries(st.sampled_from(["zzz", "future_kind"]), anything, min_size=1, max_size=2),
)


def _dm(tg: FakeTelegram, chat_id: int, text: str) -> dict[str, Any]:
    return {
        "message": {
            "message_id": 1,
            "date": 1_700_000_000,
            "chat": {"id": chat_id, "type": "private"},
            "from": tg.user(chat_id, "Member"),
            "text": text,
        }
    }


@settings(FUZZ, max_examples=40)
@given(update=odd_updates)
def test_an_odd_telegram_update_never_stops_halo(telegram: TelegramRig, update: dict[str, Any]) -> None:
    """Whatever the update, the next well-formed message is still answered, exactly once. A
    stranger in the update may rightly make halo tell the parents (a pairing request): those
    and group-guard notices are allowed; an answer to anyone else is not."""

    def answers_to_wags() -> int:
        return sum("You are Wags" in text for text in telegram.tg.texts(WAGS))

    before, to_mom = answers_to_wags(), telegram.sent_to(MOM)
    telegram.push(update)
    telegram.push(_dm(telegram.tg, WAGS, "/whoami"))
    telegram.loop.run(eventually(lambda: answers_to_wags() >= before + 1, what="the answer to /whoami"))
    assert answers_to_wags() == before + 1
    new_to_mom = telegram.tg.texts(MOM)[to_mom:]
    # notices to parents (a pairing request, a stranger in the parents group) are right; an answer is not
    assert not any(text.startswith("You are") for text in new_to_mom), f"an odd update was answered: {new_to_mom}"


@settings(FUZZ, max_examples=25)
@given(text=odd_text.filter(lambda t: user_line(t) and not t.lstrip().startswith("/")))
def test_a_well_formed_dm_with_odd_text_is_answered_once(telegram: TelegramRig, text: str) -> None:
    before = telegram.sent_to(MOM)
    telegram.push(_dm(telegram.tg, MOM, text))
    telegram.wait_sent(MOM, before + 1)
    telegram.push(_dm(telegram.tg, WAGS, "/whoami"))  # a later update, handled after this one
    telegram.wait_sent(WAGS, telegram.sent_to(WAGS) + 1)
    assert telegram.sent_to(MOM) == before + 1
    said = telegram.halo.transcripts.read_from(f"telegram:{MOM}")
    assert user_line(text)[:4000] in [line.text for _, line in said if line.role == "user"]


# --- (c) Discord -------------------------------------------------------------------------


class DiscordRig:
    """halo with its Discord adapter on the stand-in Discord's gateway, on a loop of its own."""

    def __init__(self, home: Path, model: FakeOpenAI) -> None:
        self.loop = LoopThread()
        self.dc: FakeDiscord = self.loop.run(FakeDiscord(channels=(WORK, 3002)).__aenter__())
        write_home(home, llm_yaml(model) + discord_yaml(self.dc))
        self.halo: Halo = self.loop.run(self._start(home))
        self.priya = self.dc.person(PRIYA, "Priya")

    async def _start(self, home: Path) -> Halo:
        halo = build_halo(load_settings(home))
        await halo.start_adapters()
        await eventually(lambda: discord_adapter_of(halo).status()["connected"], what="discord READY")
        return halo

    def dispatch(self, message: dict[str, Any]) -> None:
        self.loop.run(self.dc.dispatch_message(message))

    def close(self) -> None:
        self.loop.run(self.halo.close())
        self.loop.run(self.dc.__aexit__(None, None, None))
        self.loop.stop()


@pytest.fixture(scope="module")
def discord(model: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiscordRig]:
    rig = DiscordRig(tmp_path_factory.mktemp("fuzz-discord") / "halo-home", model)
    yield rig
    rig.close()


WORK, PRIYA = 3001, 2001
snowflakes = st.one_of(
    st.sampled_from([PRIYA, 1001, 1002, 3001, 3002, 9000, 7000]).map(str),
    st.integers(0, 2**64 - 1).map(str),
)
discord_users = st.fixed_dictionaries(
    {
        "id": snowflakes,
        "username": odd_text,
        "discriminator": st.sampled_from(["0", "1234"]),
        "avatar": st.none(),
        "bot": st.booleans(),
    },
    optional={"global_name": st.one_of(st.none(), odd_text)},
)
# Shaped as Discord's gateway promises (its fields and their types), odd in every value: the
# author (a bot, a stranger, a member's id), the channel, the guild, mentions, a reply to nothing.
odd_discord_messages = st.fixed_dictionaries(
    {
        "id": snowflakes,
        "channel_id": st.one_of(st.just(str(WORK)), snowflakes),
        "author": discord_users,
        "content": st.one_of(odd_text, st.sampled_from(["/whoami", "<@9000> /whoami", "<@9000> who am I?"])),
        "timestamp": st.just("2026-11-23T10:00:00+00:00"),
        "edited_timestamp": st.none(),
        "tts": st.booleans(),
        "mention_everyone": st.booleans(),
        "mentions": st.lists(discord_users, max_size=2),
        "mention_roles": st.just([]),
        "attachments": st.just([]),
        "embeds": st.just([]),
        "pinned": st.booleans(),
        "type": st.sampled_from([0, 19, 7, 6]),
    },
    optional={
        "guild_id": st.sampled_from(["7000", "123"]),
        "message_reference": st.fixed_dictionaries({"message_id": snowflakes, "channel_id": snowflakes}),
    },
).map(lambda m: {**m, "author": {**m["author"], "bot": True}} if m["author"]["id"] == str(PRIYA) else m)
# Priya's own id is only ever a bot here (a bot wearing her id must not be answered as her): a
# real message from her would rightly be answered


def _discord_message(author_id: int, *, bot: bool, content: str = "/whoami") -> dict[str, Any]:
    return {
        "id": "555",
        "channel_id": str(WORK),
        "guild_id": "7000",
        "author": {"id": str(author_id), "username": "x", "discriminator": "0", "avatar": None, "bot": bot},
        "content": content,
        "timestamp": "2026-11-23T10:00:00+00:00",
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "type": 0,
    }


@settings(FUZZ, max_examples=40)
@given(message=odd_discord_messages)
@example(message=_discord_message(PRIYA, bot=True))  # a bot wearing Priya's id
@example(message=_discord_message(4242, bot=False))  # a stranger in the work channel
@example(message=_discord_message(PRIYA, bot=True, content="<@9000> what is left to do?"))
def test_an_odd_discord_message_never_stops_halo_nor_speaks_as_a_member(
    discord: DiscordRig, message: dict[str, Any]
) -> None:
    """Whatever arrives, the next well-formed message in the work channel is answered exactly
    once, and nothing the odd message said is answered as Priya's."""

    def answers_to_priya() -> list[str]:
        return [text for text in discord.dc.texts(WORK) if "Priya" in text and text.startswith("You are")]

    def answered(message_id: int) -> bool:
        return any(
            str((m.get("message_reference") or {}).get("message_id")) == str(message_id) for m in discord.dc.sent(WORK)
        )

    before = len(answers_to_priya())
    discord.dispatch(message)
    asked = discord.loop.run(discord.dc.say(WORK, discord.priya, "/whoami"))
    discord.loop.run(eventually(lambda: answered(asked), what="the answer to Priya's /whoami"))
    assert len(answers_to_priya()) == before + 1, "an odd message was answered as Priya's"


# --- (d) MQTT ---------------------------------------------------------------------------

topics = st.one_of(
    st.sampled_from(
        [
            "zigbee2mqtt/hall sensor",
            "zigbee2mqtt/bridge/state",
            "zigbee2mqtt",
            "frigate/events",
            "owntracks/mom/phone/event",
            "homeassistant/binary_sensor/door/state",
            "homeassistant/sensor/x/config",
            "halo/events/doorbell",
            "halo/events/",
            "house/anything",
        ]
    ),
    st.text(max_size=60),
    st.builds("/".join, st.lists(st.text(max_size=12), max_size=6)),
)
payloads = st.one_of(
    st.binary(max_size=400),
    st.builds(lambda v: json.dumps(v).encode(), json_values),
    st.builds(lambda v: json.dumps({"after": v, "_type": "transition", "id": v}).encode(), json_values),
    st.builds(lambda t: t.encode("utf-8", "surrogatepass"), odd_text),
    st.builds(lambda n: b"[" * n, st.integers(1, 100_000)),
    st.builds(lambda n: b"9" * n, st.integers(4000, 6000)),  # an integer too long to convert
)


@settings(FUZZ, max_examples=400)
@given(topic=topics, payload=payloads, retained=st.booleans())
def test_any_mqtt_payload_is_an_observation_or_malformed(topic: str, payload: bytes, retained: bool) -> None:
    try:
        found = parse(topic, payload, received_at=datetime.now(UTC), retained=retained)
    except Malformed as exc:
        assert str(exc)
        return
    assert found is None or isinstance(found, Observation)
    if found is not None:
        assert isinstance(found.payload, dict)
        json.dumps(found.payload)  # what the rules and the event log store must serialise
