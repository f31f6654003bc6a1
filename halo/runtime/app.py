"""The composition root: the only module that knows every part and wires them together."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agents import Model

from config.settings import Settings
from halo.commands.builtin import BUILTIN_COMMANDS, CommandRegistry
from halo.commands.memory import MEMORY_COMMANDS
from halo.context.builder import ContextBuilder, PersonaSource
from halo.context.memory import MemorySource
from halo.context.recall import RECALL_COMMAND, RecallSource, memory_files_in_context
from halo.context.recall import recall as recall_tool
from halo.family.db import HaloDB
from halo.family.delivery import Delivery
from halo.family.groups import GroupGuard
from halo.family.members import FamilyEditor
from halo.family.pairing import Pairing
from halo.pipeline.compaction import compact_if_needed
from halo.pipeline.gateway import Gateway, Reply
from halo.pipeline.inbound import GatewayInbound
from halo.pipeline.services import Services
from halo.pipeline.sessions import SessionStore
from halo.pipeline.turn import Turn
from halo.port import Adapter, PresenceCheck
from halo.runtime.memory_wiring import build_memory, memory_after_turn
from halo.runtime.providers import build_model, close_model, model_settings
from halo.runtime.starter import write_default_soul, write_default_user_files
from halo.safety.classifier import RiskClassifier
from halo.safety.gate import SafetyGate
from halo.safety.notify import Notifier
from halo.safety.profiles import model_name
from halo.safety.tone import ProfileSource
from halo.tools.guarded import default_tools
from halo.tools.memory import memory_tools
from memory import daily
from memory.semantic import SemanticMemory
from memory.semantic.embedders import Embedder, load_embedder
from policy import PolicyEngine
from transcripts import AuditLog, TranscriptStore

log = logging.getLogger(__name__)


@dataclass
class Halo:
    """A running halo: its services, its gateway and its adapters."""

    settings: Settings
    services: Services
    gateway: Gateway
    inbound: GatewayInbound
    adapters: list[Adapter] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    owned_models: list[Model] = field(default_factory=list)  # their HTTP clients are closed on close()

    def adapter_status(self) -> dict[str, Any]:
        return {a.platform: a.status() for a in self.adapters}

    async def start(self) -> None:
        await self.start_background()
        await self.start_adapters()

    async def start_background(self) -> None:
        """Work that needs a running loop: extraction left over from before a restart, and
        the semantic index's sync schedule."""
        await self.services.memory.start()
        await self.services.semantic.start()
        await self.services.delivery.start()  # what a previous run left in the outbox goes now

    async def start_adapters(self) -> None:
        for adapter in self.adapters:
            await adapter.start()

    async def close(self) -> None:
        for adapter in reversed(self.adapters):
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping adapter %s failed", adapter.platform)
        await self.gateway.drain()
        await self.services.delivery.close()
        await self.services.memory.close()
        await self.services.semantic.close()
        await self.services.sessions.close()
        await self.services.db.close()
        for model in self.owned_models:
            await close_model(model)


def build_halo(settings: Settings, *, model: Model | None = None) -> Halo:
    """Wire every part from settings. `model` overrides the configured provider (bench, tests)."""
    from adapters.web import WebChatAdapter

    paths = settings.paths
    paths.ensure()
    write_default_soul(paths.soul)
    write_default_user_files(paths, settings.members)
    audit = AuditLog(paths.events_log)
    policy = PolicyEngine(settings.family_view(), extra_dir=paths.policies, audit=audit)
    transcripts = TranscriptStore(paths.transcripts)
    db = HaloDB(paths.halo_db)
    delivery = Delivery(db, transcripts, lambda: policy.family, audit=audit)
    main_model = model if model is not None else build_model(settings.llm)
    extraction_model = _extraction_model(settings, model, main_model)
    memory = build_memory(settings, policy, transcripts, extraction_model)
    semantic = build_semantic(settings)
    memory.on_change.append(semantic.request_sync)  # a sync is queued after each distillation
    daily_section = daily.NOTES if settings.memory.distillation_enabled else daily.TRANSCRIPT
    # safety alerts reach parents through the outbox: their web inbox and their other DMs
    notifier = Notifier(lambda: policy.family, delivery, audit)
    safety = build_safety(settings, policy, notifier, audit, main_model)
    services = Services(
        settings=settings,
        paths=paths,
        policy=policy,
        transcripts=transcripts,
        sessions=SessionStore(settings.sessions.url, paths.sessions_db, settings.sessions.history_token_budget),
        audit=audit,
        context=ContextBuilder(
            [
                PersonaSource(paths.soul),
                ProfileSource(),
                MemorySource(paths, daily_section=daily_section),
                RecallSource(already_in_context=memory_files_in_context),
            ]
        ),
        commands=CommandRegistry([*BUILTIN_COMMANDS, *MEMORY_COMMANDS, RECALL_COMMAND]),
        db=db,
        delivery=delivery,
        pairing=Pairing(db, FamilyEditor(paths, policy), policy, delivery, audit),
        groups=GroupGuard(db, policy, delivery, audit),
        model=main_model,
        model_settings=model_settings(settings.llm),
        tools=[*default_tools(), *memory_tools(), recall_tool],
        memory=memory,
        semantic=semantic,
        notifier=notifier,
        safety=safety,
    )
    gateway = Gateway(services)

    async def keep_session_in_budget(turn: Turn, reply: Reply) -> None:
        if reply.kind == "model":
            await compact_if_needed(services.sessions, turn.scope.id, services.model, settings.llm.tracing)

    gateway.after_turn.append(keep_session_in_budget)
    gateway.after_turn.append(memory_after_turn(memory))

    async def index_later(turn: Turn, reply: Reply) -> None:
        semantic.mark_active(turn.scope.id)  # the next scheduled sync picks it up

    gateway.after_turn.append(index_later)
    inbound = GatewayInbound(gateway, services.groups, services.commands, lambda: policy.family, delivery)
    adapters: list[Adapter] = [WebChatAdapter(inbound, db)]
    if settings.telegram.token is not None:
        from adapters.telegram import TelegramAdapter

        adapters.append(TelegramAdapter(inbound, settings.telegram, db, audit))
    for adapter in adapters:
        delivery.register(adapter.platform, adapter)
        if isinstance(adapter, PresenceCheck):
            services.groups.register_presence(adapter.platform, adapter.still_in_chat)
    # close_model closes only clients build_model made, once: a model passed in stays the caller's
    owned = [m for m in (main_model, extraction_model, *safety.owned_models()) if m is not None]
    return Halo(settings, services, gateway, inbound, adapters=adapters, owned_models=owned)


def build_safety(
    settings: Settings, policy: PolicyEngine, notifier: Notifier, audit: AuditLog, main_model: Model | None
) -> SafetyGate:
    """The child guardrails, with the cheap-tier classifier and per-profile models when a
    provider is configured (built now, so a bad model name fails at start-up)."""
    llm = settings.llm
    classifier = None
    models: dict[str, Model] = {}
    if main_model is not None:
        cheap = build_model(llm, llm.cheap_model) if llm.cheap_model and llm.provider != "none" else None
        classifier = RiskClassifier(cheap or main_model, model_settings(llm), tracing=llm.tracing)
        for profile in settings.safety.profiles.values():
            name = model_name(profile, llm)
            if name and name != llm.model and profile.model not in models:
                built = build_model(llm, name)
                if built is not None:
                    models[profile.model] = built
    return SafetyGate(policy, notifier, audit, classifier=classifier, models=models)


def _extraction_model(settings: Settings, override: Model | None, main: Model | None) -> Model | None:
    """The cheap tier for memory extraction (llm.cheap_model), else the main model."""
    if settings.memory.extractor != "llm" or main is None:
        return None
    if override is None and settings.llm.cheap_model:
        return build_model(settings.llm, settings.llm.cheap_model)
    return main


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
