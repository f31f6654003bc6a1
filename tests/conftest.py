"""Shared fixtures: a temporary HALO_HOME, a fake model server, halo served on 127.0.0.1.

This module imports only the standard library and pytest: a module of pure tests runs in about a
second. What builds a halo (the Agents SDK, SQLAlchemy, aiohttp) is imported inside the fixture
that needs it. The hooks below keep the suite off the caller's own HALO_HOME, turn pytest-xdist on
for a run of many test files, and kill every process a test started (tests/processes.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests import processes

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.test_utils import TestServer

    from config.settings import Settings
    from halo.storage import HaloDB
    from tests.fakes.llm_server import FakeOpenAI

# The SDK reads this once, on first use; set here it holds in this process and every `halo serve`
# a test starts (the env is inherited), without importing the SDK for tests that never use it.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

PARALLEL_FROM = 10  # test files: fewer run in this process (xdist workers cost an import of everything each)
SUITE_SWITCHES = "HALO_TEST_"  # HALO_TEST_STORAGE, HALO_TEST_POSTGRES: the suite's own, kept
_outside_env: dict[str, str] = {}
_scratch = pytest.StashKey[Path]()  # this process's temporary HOME


def pytest_configure(config: pytest.Config) -> None:
    """Whatever HALO_HOME, HALO_* or ~/.halo the caller has, the suite runs in its own homes: drop
    halo's variables and point HOME (so halo's default, ~/.halo) into a temporary directory. Done
    before any test module is imported, and inherited by every process a test starts.

    HALO_HOME is left unset, not pointed elsewhere: the environment overrides halo.yaml and the
    home a caller passes to `load_settings` (config/settings.py), so a HALO_HOME here would move
    every test's halo into one shared directory."""
    _outside_env.update(os.environ)
    for name in [name for name in os.environ if name.startswith("HALO_") and not name.startswith(SUITE_SWITCHES)]:
        del os.environ[name]
    if "UV_CACHE_DIR" not in os.environ:  # `uv run` in a test keeps the caller's cache, not a cold one
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["UV_CACHE_DIR"] = os.path.join(cache, "uv")
    # halo's own modules keep their bytecode between runs (site-packages has it from install,
    # pyproject's compile-bytecode): with PYTHONDONTWRITEBYTECODE set, every xdist worker and every
    # `halo serve` a test starts would compile halo and the tests from source again.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    scratch = Path(tempfile.mkdtemp(prefix="halo-tests-"))
    os.environ["HOME"] = str(scratch)
    config.stash[_scratch] = scratch


def pytest_unconfigure(config: pytest.Config) -> None:
    processes.reap()
    scratch = config.stash.get(_scratch, None)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    if _outside_env:
        os.environ.clear()
        os.environ.update(_outside_env)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which turns "auto" into a worker count
def pytest_cmdline_main(config: pytest.Config) -> None:
    """`uv run pytest` (the suite, or `-m "not slow"`) runs on one worker per core; one module or a
    few run here, at once. `-n N` always wins (`-n 0`: no workers)."""
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # an xdist worker re-parses the command line: it must never start workers of its own
    if getattr(config.option, "numprocesses", "no xdist") is not None:
        return  # `-n` given, or `-p no:xdist`
    if config.getoption("collectonly") or config.getoption("usepdb"):
        return
    if _test_files(config.args) >= PARALLEL_FROM:
        config.option.numprocesses = "auto"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on PostgreSQL talks to a real server (a fresh database each): it is `slow` too. The
    inner loop (`-m "not slow"`) runs each store-parametrised test on the embedded store; the
    whole suite and CI run both."""
    for item in items:
        if item.get_closest_marker("postgres") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


def _test_files(args: list[str]) -> int:
    count = 0
    for arg in args:
        path = Path(arg.split("::", 1)[0])
        if path.is_dir():
            count += sum(1 for _ in path.rglob("test_*.py"))
        elif path.is_file():
            count += 1
    return count


def pytest_sessionfinish(session: pytest.Session) -> None:
    """hypothesis's plugin imports all of hypothesis for its end-of-run summary, even when no test
    used it (about as long as the rest of a pure module's run). In a run where hypothesis was never
    imported it has nothing to report, so it goes before the summary. (Under xdist the summary
    is the controller's, which never imports it: left alone there.)"""
    if "hypothesis" in sys.modules or getattr(session.config.option, "numprocesses", None):
        return
    plugin = session.config.pluginmanager.get_plugin("hypothesispytest")
    if plugin is not None:
        session.config.pluginmanager.unregister(plugin)


def pytest_report_header(config: pytest.Config) -> str:
    workers = getattr(config.option, "numprocesses", None)
    how = f"{workers} pytest-xdist workers" if workers else "this process (no xdist workers)"
    return f"halo: tests run in {how}; HOME is {config.stash.get(_scratch, None)}, HALO_* unset"


@pytest.fixture(autouse=True)
def _own_home_and_processes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test: a HOME of its own (so a ~/.halo of its own, for a test that names no home), and
    every process it started (tests/processes.py) killed with its group when it ends, whatever
    the test did."""
    monkeypatch.setenv("HOME", tempfile.mkdtemp(prefix="home-", dir=request.config.stash[_scratch]))
    since = processes.mark()
    yield
    started = processes.mark() > since
    processes.reap(since)
    if started and request.node.get_closest_marker("slow") is None:
        pytest.fail('this test starts a process: mark it `slow` so `-m "not slow"` stays a loop in seconds')


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
  timeout_seconds: 30
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
    from halo.routing.router import TRIAGE_INSTRUCTIONS  # only a halo's model asks: the SDK is loaded by then

    if TRIAGE_INSTRUCTIONS.splitlines()[0] not in json.dumps(body):
        return None
    return "L2"


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    from tests.fakes.llm_server import FakeOpenAI

    async with FakeOpenAI(default_reply="Hello from the fake model") as fake:
        fake.interceptors.append(low_risk_classifier)
        fake.interceptors.append(default_level_triage)
        yield fake


@pytest.fixture(scope="session", autouse=True)
def _postgres_templates() -> Iterator[None]:
    """The migrated template databases tests copied (tests/storage_support.py) go at the end."""
    yield
    storage_support = sys.modules.get("tests.storage_support")  # imported only by a test that made one
    if storage_support is not None:
        storage_support.drop_templates()


@pytest.fixture(autouse=True)
def _everything_on_postgres(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`HALO_TEST_STORAGE=postgres uv run pytest …`: every test's halo on a PostgreSQL database
    of its own, empty at the newest migration, not only the modules that run on both. A test marked `own_store`
    chooses its store itself (the SQLite file or JSONL it opens, its own PostgreSQL behind a
    proxy) and is left alone."""
    if os.environ.get("HALO_TEST_STORAGE") != "postgres" or request.node.get_closest_marker("own_store"):
        yield
        return
    from tests.storage_support import database_url, drop_database, new_database

    name = asyncio.run(new_database(migrated=True))
    monkeypatch.setenv("HALO_STORAGE__URL", database_url(name))
    yield
    asyncio.run(drop_database(name))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def on_both_stores(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str | None]:
    """Runs the test twice: halo.db on the SQLite file, then on a PostgreSQL database of the
    test's own, empty at the newest migration (tests/storage_support.py), through
    HALO_STORAGE__URL, so every Settings the test loads uses it. Yields the URL, or None for
    SQLite. A module opts in with `pytestmark = pytest.mark.usefixtures("on_both_stores")`."""
    if request.param == "sqlite":
        yield None
        return
    from tests.storage_support import fresh_database

    async with fresh_database(migrated=True) as url:
        monkeypatch.setenv("HALO_STORAGE__URL", url)
        yield url


@pytest.fixture
async def halo_db(on_both_stores: str | None, tmp_path: Path) -> AsyncIterator[HaloDB]:
    """A HaloDB on each backend in turn (the SQLite file in tmp_path, then PostgreSQL)."""
    from halo.storage import HaloDB

    db = HaloDB(tmp_path / "halo.db", on_both_stores)
    yield db
    await db.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "halo-home"


@pytest.fixture
def settings_for(home: Path) -> Callable[..., Settings]:
    from config.loader import load_settings

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
    import aiohttp
    from aiohttp.test_utils import TestServer

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
