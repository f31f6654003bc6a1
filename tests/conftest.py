"""Shared fixtures: a temporary HALO_HOME, a fake model server, halo served on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from agents import set_tracing_disabled
from aiohttp.test_utils import TestServer

from config.loader import load_settings
from config.settings import Settings
from halo.routing.router import TRIAGE_INSTRUCTIONS
from halo.storage import HaloDB
from tests.fakes.llm_server import FakeOpenAI
from tests.storage_support import database_url, drop_database, drop_templates, fresh_database, new_database

set_tracing_disabled(True)

FAMILY_YAML = """\
family: {name: Sharma}
members:
  - {id: wags,  name: Wags,  role: parent, telegram_user_id: 1001, web_token: wags-token}
  - {id: mom,   name: Mom,   role: parent, telegram_user_id: 1002, web_token: mom-token}
  - {id: aarav, name: Aarav, role: child, age_group: adolescent, telegram_user_id: 1003, web_token: aarav-token}
  - {id: tara,  name: Tara,  role: child, age_group: young_child, telegram_user_id: 1004}
  - {id: priya, name: Priya, role: colleague, discord_user_id: 2001, web_token: priya-token}
owner: wags
parents_group: {telegram_chat_id: -1001234}
work: {discord_channel_ids: [3001]}
routing: {enabled: false}  # every message reaches llm.model, as these tests expect; tests/test_routing.py turns it on
"""


OWNER_TOKEN = "wags-token"  # the owner's own web_token: the web chat needs a credential, even on loopback
OWNER_AUTH = {"Authorization": f"Bearer {OWNER_TOKEN}"}  # a parent's credential for the admin routes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_home(home: Path, extra_yaml: str = "", family: str = FAMILY_YAML) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "halo.yaml").write_text(family + textwrap.dedent(extra_yaml))
    return home


def llm_yaml(fake: FakeOpenAI, max_retries: int = 1) -> str:
    return f"""\
llm:
  provider: openai-compatible
  model: fake-model
  base_url: {fake.base_url}
  api_key: test-key
  max_retries: {max_retries}
  retry_backoff_seconds: 0.01
  timeout_seconds: 5
"""


def low_risk_classifier(body: dict[str, Any]) -> str | None:
    """Answers halo's child-safety classifier "low", so a test scripting a child's reply with
    `fake_llm.reply(...)` gets it for the reply and not for the classification around it.
    Tests about the classifier itself script it (tests/safety_support.py)."""
    if "child-safety classifier" not in json.dumps(body):
        return None
    return json.dumps({"level": "low", "category": "none", "blocked_topic": None, "summary": ""})


def default_level_triage(body: dict[str, Any]) -> str | None:
    """Answers halo's routing triage (halo/routing/router.py) "L2", the level a message had
    before routing, so the scripted replies stay the replies'. Routing tests script it."""
    if TRIAGE_INSTRUCTIONS.splitlines()[0] not in json.dumps(body):
        return None
    return "L2"


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(default_reply="Hello from the fake model") as fake:
        fake.interceptors.append(low_risk_classifier)
        fake.interceptors.append(default_level_triage)
        yield fake


@pytest.fixture(scope="session", autouse=True)
def _postgres_templates() -> Iterator[None]:
    """The migrated template databases tests copied (tests/storage_support.py) go at the end."""
    yield
    drop_templates()


@pytest.fixture(autouse=True)
def _everything_on_postgres(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`HALO_TEST_STORAGE=postgres uv run pytest …`: every test's halo on its own fresh
    PostgreSQL database, not only the modules that run on both (a search for what differs; a
    test that opens halo.db with sqlite3 itself, like test_reminder_restart, fails there)."""
    if os.environ.get("HALO_TEST_STORAGE") != "postgres" or os.environ.get("HALO_STORAGE__URL"):
        yield
        return
    name = asyncio.run(new_database(migrated=True))
    monkeypatch.setenv("HALO_STORAGE__URL", database_url(name))
    yield
    asyncio.run(drop_database(name))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def on_both_stores(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str | None]:
    """Runs the test twice: halo.db on the SQLite file, then on a fresh PostgreSQL database
    (through HALO_STORAGE__URL, so every Settings the test loads uses it). Yields the URL, or
    None for SQLite. A module opts in with `pytestmark = pytest.mark.usefixtures("on_both_stores")`."""
    if request.param == "sqlite":
        yield None
        return
    async with fresh_database(migrated=True) as url:
        monkeypatch.setenv("HALO_STORAGE__URL", url)
        yield url


@pytest.fixture
async def halo_db(on_both_stores: str | None, tmp_path: Path) -> AsyncIterator[HaloDB]:
    """A HaloDB on each backend in turn (the SQLite file in tmp_path, then PostgreSQL)."""
    db = HaloDB(tmp_path / "halo.db", on_both_stores)
    yield db
    await db.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "halo-home"


@pytest.fixture
def settings_for(home: Path) -> Callable[..., Settings]:
    def make(extra_yaml: str = "", **overrides: Any) -> Settings:
        write_home(home, extra_yaml)
        return load_settings(home, **overrides)

    return make


class RunningHalo:
    """halo's real aiohttp app on 127.0.0.1 with a client session pointed at it."""

    def __init__(self, halo: Any, server: TestServer, http: aiohttp.ClientSession) -> None:
        self.halo = halo
        self.server = server
        self.http = http

    def url(self, path: str) -> str:
        return str(self.server.make_url(path))

    async def chat(self, text: str, token: str | None = OWNER_TOKEN, **kwargs: Any) -> tuple[int, Any]:
        """Send `text` as the member whose web_token is `token` (the owner's unless said; None: none)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with self.http.post(self.url("/api/chat"), json={"text": text}, headers=headers, **kwargs) as r:
            return r.status, await r.json()


@pytest.fixture
async def serve_halo() -> AsyncIterator[Callable[[Settings], Any]]:
    """Start halo (build_halo + create_app) on a real 127.0.0.1 socket."""
    from admin_api.server import create_app
    from halo.runtime.app import build_halo

    running: list[RunningHalo] = []

    async def start(settings: Settings) -> RunningHalo:
        halo = build_halo(settings)
        server = TestServer(create_app(halo), host="127.0.0.1")
        await server.start_server()
        http = aiohttp.ClientSession()
        instance = RunningHalo(halo, server, http)
        running.append(instance)
        return instance

    yield start
    for instance in running:
        await instance.http.close()
        await instance.server.close()
        await instance.halo.close()


class Outbox:
    """Records what halo sends through `Delivery` for the `telegram` platform, as the
    adapter would queue it (its `send` contract), for gateway-level tests."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def send(self, message: Any) -> None:  # halo.port.Outbound
        self.sent.append((message.scope_id, message.text))

    def to(self, scope_id: str) -> list[str]:
        return [text for sid, text in self.sent if sid == scope_id]


@pytest.fixture
async def halo(fake_llm: FakeOpenAI, settings_for: Callable[..., Settings]) -> AsyncIterator[Any]:
    """halo built from the test family and the fake model, without starting adapters."""
    from halo.runtime.app import build_halo

    running = build_halo(settings_for(llm_yaml(fake_llm)))
    yield running
    await running.close()


@pytest.fixture
def outbox(halo: Any) -> Outbox:
    box = Outbox()
    halo.delivery.register("telegram", box)
    return box


@pytest.fixture
async def tg() -> AsyncIterator[Any]:
    """The Telegram Bot API stand-in (tests/fakes/telegram_server.py)."""
    from tests.fakes.telegram_server import FakeTelegram

    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def start_telegram(home: Path, fake_llm: FakeOpenAI, tg: Any) -> AsyncIterator[Any]:
    """`await start_telegram(extra_yaml, ...)`: halo polling the stand-in (tests/telegram_support.py)."""
    from tests.telegram_support import telegram_starter

    async for start in telegram_starter(home, fake_llm, tg):
        yield start
