"""One halo, served at once to this machine and to peers that are not loopback (see peers.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from admin_api.connections import ConnectionLimits, GuardedSite
from admin_api.server import create_app
from halo.core.envelope import Speaker
from halo.inventory import Halo
from halo.inventory import Halo as Services
from halo.runtime.app import build_halo
from halo.web_auth import SESSION_COOKIE, DashboardLogin
from tests.admin.peers import SPOOFED_PEER, PeerSite, non_loopback_ipv4
from tests.semantic_helpers import save_concept_model
from transcripts.lines import Message
from transcripts.lines import Reply as ReplyLine

ADMIN_TOKEN = "admin-secret-token-0123456789"
ADMIN_YAML = f"admin: {{token: {ADMIN_TOKEN}}}\n"
SEEDED = "web:mom"
_INTERFACE = non_loopback_ipv4()


def pytest_configure(config: pytest.Config) -> None:
    """schemathesis's pytest plugin (test_openapi.py's `@schema.parametrize()`) costs seconds to
    import, so pyproject.toml leaves it out (`-p no:schemathesis`) and only a run that collects
    these tests loads it, under another name."""
    if not config.pluginmanager.has_plugin("schemathesis-for-admin"):
        import schemathesis.pytest.plugin

        config.pluginmanager.register(schemathesis.pytest.plugin, "schemathesis-for-admin")


@dataclass
class Reply:
    status: int
    body: Any
    headers: Any
    text: str


DEFAULT: Any = object()  # "the endpoint's own credential" (the admin token on this machine)


class Endpoint:
    """A base URL and how its peers look to the server: "local", "transport" or "interface".
    `token` is sent unless a call says otherwise (None: no Authorization header)."""

    def __init__(self, http: aiohttp.ClientSession, base: str, mode: str, token: str | None = None) -> None:
        self.http = http
        self.base = base
        self.mode = mode
        self.token = token

    async def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = DEFAULT,
        headers: dict[str, str] | None = None,
        json_body: Any = None,
        cookies: dict[str, str] | None = None,
    ) -> Reply:
        sent = dict(headers or {})
        token = self.token if token is DEFAULT else token
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        if cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        async with self.http.request(
            method, self.base + path, headers=sent, json=json_body, allow_redirects=False
        ) as resp:
            text = await resp.text()
            try:
                body = json.loads(text)
            except ValueError:
                body = None
            return Reply(resp.status, body, resp.headers, text)


class AdminHarness:
    def __init__(self, halo: Halo, runner: web.AppRunner, http: aiohttp.ClientSession) -> None:
        self.halo = halo
        self.runner = runner
        self.http = http
        self.local: Endpoint
        self.port: int  # of the local site
        self.limits: ConnectionLimits  # its connection policy, from halo.yaml's admin section
        self.remotes: list[Endpoint] = []

    @property
    def services(self) -> Services:
        return self.halo

    async def sign_in(self) -> dict[str, str]:
        """What a parent's browser holds after opening the login link `halo serve` prints."""
        link = self.halo.paths.logins
        token = DashboardLogin(link).issue_link_token()
        async with self.http.get(f"{self.local.base}/login?token={token}", allow_redirects=False) as resp:
            assert resp.status == 303, await resp.text()
            morsel = resp.cookies[SESSION_COOKIE]
            return {SESSION_COOKIE: morsel.value}

    async def seed(self, scope_id: str = SEEDED) -> None:
        await seed_scope(self.services, scope_id)

    async def stranger(
        self, user_id: int = 5550001, name: str | None = "Cousin Meera", username: str | None = "meera"
    ) -> str:
        """Someone halo does not know writes to it on Telegram: a real pairing request. Its code."""
        return await ask_to_join(self.services, user_id, name, username)


async def seed_scope(services: Any, scope_id: str = SEEDED) -> None:
    """A scope with something everywhere purge must reach: session, transcript, memory, index."""
    for role, text in (("user", "The dentist is on Friday."), ("assistant", "Noted: dentist on Friday.")):
        await services.transcripts.append(
            (Message if role == "user" else ReplyLine)(
                id=f"{role}-{scope_id}",
                ts=datetime.now(UTC),
                scope_id=scope_id,
                text=text,
                speaker="mom" if role == "user" else "halo",
                platform=scope_id.split(":")[0],
            )
        )
    # the two lines are the scope's session too: it is read from the transcript
    # What /remember keeps (markup and all: the dashboard must show it as text).
    await services.memory.remember(
        scope_id, "Dentist: Friday <script>alert(1)</script>", by="Mom", when=datetime.now(UTC)
    )
    await services.semantic.sync_all([scope_id])  # the scope's index, from its transcript and memory
    await seed_reminder(services, scope_id)
    services.audit.write(
        "policy",
        principal="mom",
        action="read_memory",
        resource=scope_id,
        allowed=True,
        policy_ids=["memory-own-scope"],
        reason="seeded",
    )


async def seed_reminder(services: Any, scope_id: str = SEEDED) -> None:
    """Reminder 1 (Mom's for Aarav) and an item on the scope's list, as /remind and /list leave them."""
    from halo.lists.store import ListStore
    from halo.reminders.store import ReminderStore
    from halo.reminders.when import When

    now = datetime.now(UTC)
    await ReminderStore(services.db).add(
        set_by="mom", target="aarav", text="pack your kit", scope_id=scope_id, when=When(now + timedelta(hours=1)),
        urgent=False, now=now,
    )  # fmt: skip
    await ListStore(services.db).add(scope_id, None, ["milk"], by="mom")


async def seed_document(services: Any, scope_id: str = SEEDED) -> int:
    """A document in the scope's files, as Mom sending it would have left it; its number."""
    assert services.documents is not None
    text = "The school trip to the Science Museum is on Friday 14 March."
    doc = await asyncio.to_thread(
        services.documents.store.add,
        scope_id,
        name="trip.pdf",
        text=text,
        by="Mom",
        when=datetime.now(UTC),
        pages=1,
        size=2048,
        mime="application/pdf",
    )
    return int(doc.number)


async def ask_to_join(
    services: Any, user_id: int, name: str | None = "Cousin Meera", username: str | None = "meera"
) -> str:
    """What the gateway does for a DM from a stranger; the code of the request it makes."""
    speaker = Speaker(str(user_id), None, display_name=name, username=username)
    assert await services.pairing.on_stranger("telegram", speaker) is not None, "no request was made"
    [request] = [r for r in await services.pairing.list_pending() if r.platform_user_id == str(user_id)]
    return request.code


def remote_modes() -> list[str]:
    return ["transport", "interface"] if _INTERFACE else ["transport"]


@pytest.fixture(scope="session")
def concept_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real embedding model on disk (tests/semantic_helpers.py), so the index runs hybrid."""
    return save_concept_model(tmp_path_factory.mktemp("admin") / "concept-model")


def memory_yaml(model: Path, **memory: Any) -> str:
    """halo.yaml's memory section: the semantic index on `model`, and any other memory settings."""
    settings = {"semantic": {"embedder": "model2vec", "model": str(model)}, **memory}  # a test may give its own
    return f"memory: {json.dumps(settings)}\n"


@pytest.fixture
async def admin(
    settings_for: Callable[..., Any], concept_model: Path
) -> AsyncIterator[Callable[..., Awaitable[AdminHarness]]]:
    """`await admin(extra_yaml, memory={...})` → halo served on 127.0.0.1 (local), through a
    transport that reports a TEST-NET peer, and on this machine's non-loopback interface when
    it has one."""
    started: list[AdminHarness] = []

    async def start(extra_yaml: str = ADMIN_YAML, memory: dict[str, Any] | None = None) -> AdminHarness:
        halo = build_halo(settings_for(extra_yaml + memory_yaml(concept_model, **(memory or {}))))
        runner = web.AppRunner(create_app(halo))
        await runner.setup()
        http = aiohttp.ClientSession()
        harness = AdminHarness(halo, runner, http)
        started.append(harness)
        harness.limits = ConnectionLimits.from_settings(halo.settings.admin)
        local = GuardedSite(runner, "127.0.0.1", 0, limits=harness.limits)  # as `halo serve` listens
        await local.start()
        harness.port = local.port
        harness.local = Endpoint(http, f"http://127.0.0.1:{local.port}", "local", token=ADMIN_TOKEN)
        spoofed = PeerSite(runner, SPOOFED_PEER)
        await spoofed.start()
        harness.remotes.append(Endpoint(http, f"http://127.0.0.1:{spoofed.port}", "transport"))
        if _INTERFACE:
            nic = GuardedSite(runner, _INTERFACE, 0, limits=harness.limits)
            await nic.start()
            harness.remotes.append(Endpoint(http, f"http://{_INTERFACE}:{nic.port}", "interface"))
        return harness

    yield start
    for harness in started:
        await harness.http.close()
        await harness.runner.cleanup()
        await harness.halo.close()
