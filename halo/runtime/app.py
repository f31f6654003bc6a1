"""The composition root: the only module that knows every part and wires them together."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from agents import Model, Tool

from config.settings import Settings
from halo.commands.builtin import CommandRegistry, builtin_commands
from halo.commands.files import files_commands
from halo.commands.memory import memory_commands
from halo.commands.memory_actions import MemoryActions
from halo.context.builder import ContextBuilder, PersonaSource
from halo.context.documents import DocumentSource
from halo.context.graph import GraphRecall
from halo.context.memory import MemorySource
from halo.context.recall import Recall, RecallSource, memory_files_in_context
from halo.family.db import HaloDB
from halo.family.delivery import Delivery
from halo.family.groups import GroupGuard
from halo.family.members import FamilyEditor
from halo.family.pairing import Pairing
from halo.family.scope_admin import ScopeAdmin
from halo.home.commands import home_commands
from halo.home.events import HomeEvents
from halo.home.store import HomeStore
from halo.media.documents import Documents
from halo.media.images import build_photo_reader
from halo.media.voice import build_transcriber
from halo.pipeline.compaction import compact_if_needed
from halo.pipeline.gateway import Gateway, Reply
from halo.pipeline.inbound import GatewayInbound
from halo.pipeline.missed import CatchUp, MissedMessages
from halo.pipeline.services import Services
from halo.pipeline.turn import Turn
from halo.pipeline.turn_agents import TurnAgents
from halo.port import Adapter, PresenceCheck
from halo.routing.levels import Level
from halo.runtime.backups import BackupSchedule
from halo.runtime.graph_wiring import build_graph
from halo.runtime.memory_wiring import build_memory, memory_after_turn
from halo.runtime.private_files import make_private
from halo.runtime.providers import build_model, close_model, model_settings
from halo.runtime.starter import write_default_soul, write_default_user_files
from halo.runtime.usage_wiring import Levels, build_levels, build_routing, usage_after_turn
from halo.safety.classifier import RiskClassifier
from halo.safety.gate import SafetyGate
from halo.safety.notify import Notifier
from halo.safety.profiles import model_name
from halo.safety.tone import ProfileSource
from halo.tools.approvals import Approvals
from halo.tools.guarded import default_tools
from halo.tools.memory import memory_tools
from halo.tools.messages import message_tools
from halo.tools.web import PageFetcher, WebSearch, hosted_search_tools, search_tools, web_tools
from halo.usage.command import usage_command
from halo.usage.meter import MeteredModel
from halo.usage.prices import Prices
from halo.work.commands import task_commands
from halo.work.digest import WorkDigest
from halo.work.status import StatusAnswers
from halo.work.tasks import TaskStore
from halo.work.tools import task_tools
from memory import daily
from memory.documents import ScopeDocuments
from memory.semantic import SemanticMemory
from memory.semantic.embedders import Embedder, load_embedder
from policy import PolicyEngine
from transcripts import AuditLog, TranscriptStore
from transcripts.session import TranscriptSessions

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
    home: HomeEvents | None = None  # home rules, quiet-hours queue (fed by the MQTT adapter)
    backups: BackupSchedule | None = None  # backups.schedule, when set
    tasks: TaskStore | None = None  # the work task list (GET /tasks, the dashboard's Tasks panel)
    digest: WorkDigest | None = None  # work.digest's schedule, when configured
    scope_admin: ScopeAdmin = field(kw_only=True)  # look at, clear and purge whole scopes (admin API)
    missed: MissedMessages | None = None  # messages a crash left unanswered, caught up on start
    catching_up: asyncio.Task[CatchUp] | None = None
    approvals: Approvals | None = None  # consequential tool calls waiting for a parent

    def adapter_status(self) -> dict[str, Any]:
        return {a.platform: a.status() for a in self.adapters}

    async def start(self) -> None:
        await self.start_background()
        await self.start_adapters()
        if self.missed is not None:  # in the background: a model call must not hold up the start
            self.catching_up = asyncio.create_task(self.missed.catch_up())

    async def start_background(self) -> None:
        """Work that needs a running loop: extraction left over from before a restart, and
        the semantic index's sync schedule."""
        await self.services.memory.start()
        await self.services.semantic.start()
        await self.services.delivery.start()  # what a previous run left in the outbox goes now
        if self.services.graph is not None:
            await self.services.graph.start()  # FalkorDB (its own, or memory.graph.url); never raises
        if self.backups is not None:
            self.backups.start()
        if self.digest is not None:
            self.digest.start()
        if self.approvals is not None:
            self.approvals.start()

    async def start_adapters(self) -> None:
        if self.home is not None:
            await self.home.start()  # before MQTT: the first observation finds the rules ready
        for adapter in self.adapters:
            await adapter.start()

    async def close(self) -> None:
        if self.catching_up is not None and not self.catching_up.done():
            self.catching_up.cancel()  # what it did not reach is still open, and caught up next start
            await asyncio.gather(self.catching_up, return_exceptions=True)
        if self.backups is not None:
            self.backups.close()
        for adapter in reversed(self.adapters):
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping adapter %s failed", adapter.platform)
        if self.home is not None:
            await self.home.stop()
        if self.approvals is not None:
            await self.approvals.close()
        await self.gateway.drain()
        if self.digest is not None:
            self.digest.close()
        await self.services.delivery.close()
        await self.services.memory.close()
        await self.services.semantic.close()
        if self.services.graph is not None:
            await self.services.graph.close()  # stops the FalkorDB halo started
        self.services.transcripts.close()  # last: delivery and memory above may still append
        await self.services.db.close()
        for model in self.owned_models:
            await close_model(model)


def build_halo(settings: Settings, *, model: Model | None = None) -> Halo:
    """Wire every part from settings. `model` overrides the configured provider (bench, tests)."""
    from adapters.web import WebChatAdapter

    paths = settings.paths
    make_private(paths.home)  # before anything is written: umask 077, and an older home fixed
    paths.ensure()
    write_default_soul(paths.soul)
    write_default_user_files(paths, settings.members)
    audit = AuditLog(paths.events_log)
    policy = PolicyEngine(settings.family_view(), extra_dir=paths.policies, audit=audit)
    transcripts = TranscriptStore(paths.transcripts)
    db = HaloDB(paths.halo_db)
    delivery = Delivery(db, transcripts, lambda: policy.family, audit=audit)
    tasks = TaskStore(db)
    levels = build_levels(settings, db, model)  # L1–L3's models; every call's usage is recorded
    main_model = levels.metered(levels.main, "reply", Level.L2)
    extraction_model = levels.metered(levels.cheap, "extraction") if settings.memory.extractor == "llm" else None
    memory = build_memory(settings, policy, transcripts, extraction_model)
    semantic = build_semantic(settings)
    memory.on_change.append(semantic.request_sync)  # a sync is queued after each distillation
    graph = build_graph(settings, memory, semantic)  # ingests scopes when they go quiet
    daily_section = daily.NOTES if settings.memory.distillation_enabled else daily.TRANSCRIPT
    # safety alerts reach parents through the outbox: their web inbox and their other DMs
    notifier = Notifier(lambda: policy.family, delivery, audit)
    safety = build_safety(settings, policy, notifier, audit, transcripts, levels)
    # home events (issue 13): MQTT → observations → home rules → Delivery
    home = HomeEvents(
        settings.home_events,
        lambda: policy.family,
        HomeStore(db, settings.home_events.keep_observations),
        policy,
        delivery,
        audit,
    )
    sessions = TranscriptSessions(
        transcripts, settings.sessions.history_token_budget, max_items=settings.sessions.history_max_items
    )
    pairing = Pairing(db, FamilyEditor(paths, policy), policy, delivery, audit)
    groups = GroupGuard(db, policy, delivery, audit)
    recall = Recall(semantic, audit)
    graph_recall = GraphRecall(graph, audit)
    memory_actions = MemoryActions(memory, audit)
    scope_documents = ScopeDocuments(memory.files)  # documents members sent, in each scope's files/
    documents = Documents(scope_documents, settings.memory, semantic, audit)
    context = ContextBuilder(
        [
            PersonaSource(paths.soul),
            DocumentSource(scope_documents, settings.memory.document_excerpt_tokens),
            ProfileSource(),
            MemorySource(paths, daily_section=daily_section),
            RecallSource(recall, already_in_context=memory_files_in_context),
            graph_recall.source(),
        ]
    )
    commands = CommandRegistry(
        [
            *builtin_commands(
                registry=lambda: commands,
                llm=settings.llm,
                sessions=sessions,
                audit=audit,
                pairing=pairing,
                groups=groups,
                tools=lambda turn: [tool.name for tool in agents.offered_tools(turn)],
            ),
            *memory_commands(memory_actions),
            *files_commands(documents),
            recall.command(),
            graph_recall.command(),
            *task_commands(tasks),
            *home_commands(home),
            usage_command(levels.meter, Prices(settings.llm.prices)),
        ]
    )
    approvals = Approvals(
        db, delivery, transcripts, lambda: policy.family, audit, minutes=settings.tools.approval_minutes
    )
    tools: list[Tool] = [
        *default_tools(),
        *message_tools(approvals, delivery, lambda: policy.family),  # a parent approves each one
        *memory_tools(memory_actions),
        recall.tool(),
        graph_recall.tool(),
        *task_tools(tasks),
        *web_tools(PageFetcher()),  # "outward": the policy decides who may reach the web
        *web_search_tools(settings),
    ]
    settings_for_model = model_settings(settings.llm)
    agents = TurnAgents(
        context=context,
        policy=policy,
        safety=safety,
        model=main_model,
        model_settings=settings_for_model,
        tools=tools,
        levels=levels.reply_models(),
    )
    router, budget = build_routing(
        settings, levels, transcripts, partial(notifier.notify_parents, kind="budget"), lambda: policy.family
    )
    gateway = Gateway(
        policy=policy,
        groups=groups,
        pairing=pairing,
        safety=safety,
        commands=commands,
        transcripts=transcripts,
        sessions=sessions,
        memory=memory,
        delivery=delivery,
        audit=audit,
        llm=settings.llm,
        agents=agents,
        transcriber=build_transcriber(settings.llm),
        photos=build_photo_reader(settings.llm),
        documents=documents,
        router=router,
    )
    # what the runtime, the CLI and the admin API reach: the parts built here, never given to a turn
    services = Services(
        settings=settings,
        paths=paths,
        policy=policy,
        transcripts=transcripts,
        sessions=sessions,
        audit=audit,
        context=context,
        commands=commands,
        db=db,
        delivery=delivery,
        pairing=pairing,
        groups=groups,
        model=main_model,
        model_settings=settings_for_model,
        tools=tools,
        memory=memory,
        semantic=semantic,
        notifier=notifier,
        safety=safety,
        graph=graph,
        recall=recall,
        graph_recall=graph_recall,
        documents=documents,
    )
    if main_model is None:  # nobody to talk about a document with: at least say it was kept
        gateway.answerers.append(documents.acknowledge)
    gateway.answerers.append(
        StatusAnswers(
            tasks,
            paths,
            model=levels.metered(levels.main, "status"),
            model_settings=settings_for_model,
            tracing=settings.llm.tracing,
            deadline_seconds=settings.llm.timeout_seconds,
        )
    )

    gateway.answerers.append(approvals.answer)  # a parent's yes or no, before any model is asked

    compaction_model = levels.metered(levels.main, "distillation")

    async def keep_session_in_budget(turn: Turn, reply: Reply) -> None:
        if reply.kind == "model":
            await compact_if_needed(sessions, turn.scope.id, compaction_model, settings.llm.tracing)

    gateway.after_turn.append(keep_session_in_budget)
    gateway.after_turn.append(memory_after_turn(memory))
    gateway.after_turn.append(usage_after_turn(budget))

    async def index_later(turn: Turn, reply: Reply) -> None:
        semantic.mark_active(turn.scope.id)  # the next scheduled sync picks it up

    gateway.after_turn.append(index_later)
    admin_token = settings.admin.token.get_secret_value() if settings.admin.token else None
    inbound = GatewayInbound(gateway, groups, commands, lambda: policy.family, delivery, admin_token)
    adapters: list[Adapter] = [WebChatAdapter(inbound, db)]
    if settings.telegram.token is not None:
        from adapters.telegram import TelegramAdapter

        adapters.append(TelegramAdapter(inbound, settings.telegram, db, audit))
    if settings.discord.token is not None:
        from adapters.discord import DiscordAdapter, SeenMessages

        adapters.append(DiscordAdapter(inbound, settings.discord, SeenMessages(db)))
    if settings.mqtt.host:
        from adapters.mqtt import MqttAdapter

        adapters.append(MqttAdapter(settings.mqtt, home))  # home events only: it sends nothing
    for adapter in adapters:
        if adapter.platform != "mqtt":  # mqtt: home events in only; it sends nothing
            delivery.register(adapter.platform, adapter)
        if isinstance(adapter, PresenceCheck):
            groups.register_presence(adapter.platform, adapter.still_in_chat)
    digest = WorkDigest.from_family(lambda: policy.family, tasks, partial(delivery.send, kind="digest"))
    # close_model closes only clients build_model made, once: a model passed in stays the caller's
    owned = [*levels.built, *safety.owned_models()]
    backups = None
    if settings.backups.schedule:
        zone = settings.family.timezone
        backups = BackupSchedule(paths.home, paths.backups, settings.backups.schedule, settings.backups.keep, zone)
    missed = MissedMessages(
        transcripts,
        gateway,
        inbound,
        delivery,
        lambda: policy.family,
        audit,
        answer_within=timedelta(minutes=settings.sessions.answer_missed_minutes),
        apologise_within=timedelta(hours=settings.sessions.apologise_missed_hours),
    )
    scope_admin = ScopeAdmin(
        sessions=sessions,
        transcripts=transcripts,
        memory=memory,
        semantic=semantic,
        graph=graph,
        paths=paths,
        audit=audit,
        family=lambda: policy.family,
    )
    return Halo(
        settings,
        services,
        gateway,
        inbound,
        scope_admin=scope_admin,
        missed=missed,
        adapters=adapters,
        owned_models=owned,
        home=home,
        backups=backups,
        tasks=tasks,
        digest=digest,
        approvals=approvals,
    )


def web_search_tools(settings: Settings) -> list[Tool]:
    """A configured search backend (SearXNG), else the OpenAI provider's hosted web search, else none."""
    if settings.tools.search_url:
        return search_tools(WebSearch(settings.tools.search_url, settings.tools.search_results))
    if settings.llm.provider == "openai" and settings.tools.hosted_search:
        return hosted_search_tools()
    return []


def build_safety(
    settings: Settings,
    policy: PolicyEngine,
    notifier: Notifier,
    audit: AuditLog,
    transcripts: TranscriptStore,
    levels: Levels,
) -> SafetyGate:
    """The child guardrails, with the cheap-tier classifier and per-profile models when a
    provider is configured (built now, so a bad model name fails at start-up)."""
    llm = settings.llm
    classifier = None
    models: dict[str, Model] = {}
    cheap = levels.metered(levels.cheap, "classifier")
    if cheap is not None:
        classifier = RiskClassifier(cheap, model_settings(llm), tracing=llm.tracing)
        for profile in settings.safety.profiles.values():
            name = model_name(profile, llm)
            if name and name != llm.model and profile.model not in models:
                built = build_model(llm, name)
                if built is not None:
                    models[profile.model] = MeteredModel(built, levels.meter, "reply")
    # the classifier gets a third of the reply deadline (input and output each), the model the rest
    classify_within = llm.reply_deadline_seconds / 3
    return SafetyGate(
        policy, notifier, audit, transcripts, classifier=classifier, models=models, classify_within=classify_within
    )


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
