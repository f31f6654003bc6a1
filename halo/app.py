"""The composition root: the only module that knows every part and wires them together."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from agents import Model
from aiohttp import web

from config.settings import Settings
from halo.adapter import Adapter
from halo.commands import commands
from halo.compaction import compact_if_needed
from halo.context import ContextBuilder, PersonaSource
from halo.db import HaloDB
from halo.delivery import Delivery
from halo.gateway import Gateway, Reply
from halo.groups import GroupGuard
from halo.members import FamilyEditor
from halo.pairing import Pairing
from halo.providers import build_model, model_settings
from halo.recall import RecallSource
from halo.recall import recall as recall_tool
from halo.services import Services
from halo.sessions import SessionStore
from halo.starter import write_default_soul
from halo.tools import default_tools
from halo.turn import Turn
from memory.embedders import Embedder, load_embedder
from memory.semantic import SemanticMemory
from policy import PolicyEngine
from transcripts import AuditLog, TranscriptStore

log = logging.getLogger(__name__)

VERSION = "0.1.0"


@dataclass
class Halo:
    """A running halo: its services, its gateway and its adapters."""

    settings: Settings
    services: Services
    gateway: Gateway
    adapters: list[Adapter] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)

    def adapter_status(self) -> dict[str, Any]:
        return {a.name: a.status() for a in self.adapters}

    async def start_adapters(self) -> None:
        for adapter in self.adapters:
            await adapter.start()

    async def start_background(self) -> None:
        """Background work that needs a running loop: the semantic index's sync schedule."""
        start_semantic = getattr(self.services.semantic, "start", None)
        if start_semantic is not None:
            await start_semantic()

    async def close(self) -> None:
        for adapter in reversed(self.adapters):
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping adapter %s failed", adapter.name)
        await self.gateway.drain()
        close_semantic = getattr(self.services.semantic, "close", None)  # tests may plug in a stand-in
        if close_semantic is not None:
            await close_semantic()
        await self.services.sessions.close()
        await self.services.db.close()


def build_halo(settings: Settings, *, model: Model | None = None) -> Halo:
    """Wire every part from settings. `model` overrides the configured provider (bench, tests)."""
    from adapters.web import WebChatAdapter

    paths = settings.paths
    paths.ensure()
    write_default_soul(paths.soul)
    audit = AuditLog(paths.events_log)
    policy = PolicyEngine(settings.family_view(), extra_dir=paths.policies, audit=audit)
    transcripts = TranscriptStore(paths.transcripts)
    db = HaloDB(paths.halo_db)
    delivery = Delivery(transcripts)
    services = Services(
        settings=settings,
        paths=paths,
        policy=policy,
        transcripts=transcripts,
        sessions=SessionStore(settings.sessions.url, paths.sessions_db, settings.sessions.history_token_budget),
        audit=audit,
        context=ContextBuilder([PersonaSource(paths.soul), RecallSource()]),
        commands=commands,
        db=db,
        delivery=delivery,
        pairing=Pairing(db, FamilyEditor(paths, policy), policy, delivery, audit),
        groups=GroupGuard(db, policy, delivery, audit),
        model=model if model is not None else build_model(settings.llm),
        model_settings=model_settings(settings.llm),
        tools=[*default_tools(), recall_tool],
        semantic=build_semantic(settings),
    )
    gateway = Gateway(services)

    async def keep_session_in_budget(turn: Turn, reply: Reply) -> None:
        if reply.kind == "model":
            await compact_if_needed(services.sessions, turn.scope.id, services.model, settings.llm.tracing)

    gateway.after_turn.append(keep_session_in_budget)
    if services.semantic is not None:
        semantic = services.semantic

        async def index_later(turn: Turn, reply: Reply) -> None:
            semantic.mark_active(turn.scope.id)  # the next scheduled sync picks it up

        gateway.after_turn.append(index_later)
    adapters: list[Adapter] = [WebChatAdapter(gateway)]
    if settings.telegram.token is not None:
        from adapters.telegram import TelegramAdapter

        telegram = TelegramAdapter(gateway, settings.telegram)
        delivery.register("telegram", telegram)
        services.groups.register_presence("telegram", telegram.still_in_chat)
        adapters.append(telegram)
    return Halo(settings, services, gateway, adapters=adapters)


def build_semantic(settings: Settings) -> SemanticMemory:
    """The semantic index service, with the configured embedder (loaded lazily, off the loop).
    Built even when disabled, so /status can say so."""
    semantic = settings.memory.semantic
    llm = settings.llm
    openai_like = llm.provider in ("openai", "openai-compatible")

    async def loader() -> Embedder | None:
        return await load_embedder(
            semantic,
            llm_base_url=llm.base_url if openai_like else None,
            llm_api_key=llm.resolved_api_key() if openai_like else None,
        )

    service = SemanticMemory(settings.paths, semantic, embedder_loader=loader)
    service.say_problems()
    return service


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM, then stop adapters and finish accepted messages."""
    from admin_api.server import create_app

    halo = build_halo(settings)
    app = create_app(halo)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, settings.admin.host, settings.admin.port)
    await site.start()
    await halo.start_adapters()
    await halo.start_background()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0] if runner.addresses else (settings.admin.host, settings.admin.port)
    print(f"halo is running: http://{bound[0]}:{bound[1]}/  (chat: /chat)  HALO_HOME={settings.home}", flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    print("halo: shutting down …", flush=True)
    await runner.shutdown()  # stop accepting; in-flight requests finish
    await runner.cleanup()
    await halo.close()
    print("halo: stopped", flush=True)
