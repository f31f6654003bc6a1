"""The composition root: the only module that knows every part and wires them together.

It builds a `Halo` (halo/inventory.py); the runtime starts and closes it."""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from agents import Model, Tool

from config.settings import Settings
from halo.cluster.cluster import Cluster
from halo.cluster.family_lease import Node
from halo.cluster.forward import Forwarder
from halo.commands.builtin import CommandRegistry, builtin_commands
from halo.commands.files import files_commands
from halo.commands.memory import memory_commands
from halo.commands.memory_actions import MemoryActions
from halo.commands.remember_words import RememberWords
from halo.context.builder import ContextBuilder, PersonaSource
from halo.context.documents import DocumentSource
from halo.context.graph import GraphRecall
from halo.context.memory import MemorySource
from halo.context.recall import Recall, RecallSource, memory_files_in_context
from halo.context.tone import ProfileSource
from halo.core.live_family import LiveFamily
from halo.core.live_settings import LiveSettings
from halo.core.scope_locks import ScopeLocks
from halo.core.turn import Turn
from halo.family.direct import DirectMessages
from halo.family.groups import GroupGuard
from halo.family.members import FamilyEditor
from halo.family.pairing import Pairing
from halo.family.scope_admin import ScopeAdmin
from halo.home.commands import home_commands
from halo.home.events import HomeEvents
from halo.home.store import HomeStore
from halo.inventory import Halo
from halo.lists.commands import list_commands
from halo.lists.plain_words import ListWords
from halo.lists.service import Lists
from halo.lists.store import ListStore
from halo.lists.tools import list_tools
from halo.media.documents import Documents
from halo.media.images import build_photo_reader
from halo.media.voice import build_transcriber
from halo.outbound.asks import Asks
from halo.outbound.delivery import Delivery
from halo.pipeline.admission import Admission
from halo.pipeline.after_turn import AfterTurn
from halo.pipeline.code_answers import CodeAnswers, PlainWords
from halo.pipeline.compaction import compact_if_needed
from halo.pipeline.conversations import TranscriptConversations
from halo.pipeline.gateway import Gateway
from halo.pipeline.guarded import ChildGuardrails
from halo.pipeline.inbound import GatewayInbound
from halo.pipeline.intake import Intake
from halo.pipeline.missed import MissedMessages
from halo.pipeline.model_health import ModelHealth
from halo.pipeline.model_run import ModelRun
from halo.pipeline.reply import Answerer, Reply, in_code
from halo.pipeline.resends import Resends
from halo.pipeline.turn_agents import TurnAgents
from halo.pipeline.turn_log import TurnLog
from halo.pipeline.unconfigured import UnconfiguredChats
from halo.port import Adapter, LiveReplies, PresenceCheck
from halo.reminders.commands import reminder_commands
from halo.reminders.firing import ReminderScheduler
from halo.reminders.plain_words import ReminderWords
from halo.reminders.service import Reminders
from halo.reminders.store import ReminderStore
from halo.reminders.tools import reminder_tools
from halo.routing.levels import Level
from halo.runtime.graph_wiring import build_graph
from halo.runtime.memory_wiring import build_memory, memory_after_turn, memory_record, scope_takers
from halo.runtime.providers import build_model, close_model, model_settings
from halo.runtime.starter import write_default_soul, write_default_user_files
from halo.runtime.usage_wiring import Levels, build_levels, build_routing, say_unpriced, usage_after_turn
from halo.safety.classifier import RiskClassifier
from halo.safety.gate import SafetyGate
from halo.safety.notify import Notifier
from halo.safety.profiles import model_name
from halo.storage import HaloDB
from halo.storage.audit_rows import AuditRows
from halo.storage.config_rows import ConfigRows
from halo.storage.transcript_rows import TranscriptRows
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
from halo.work.suggestions import TaskSuggestions
from halo.work.tasks import TaskStore
from halo.work.tools import task_tools
from halo.workspace.backups import BackupSchedule
from halo.workspace.config_reload import ConfigReload
from halo.workspace.private_files import make_private
from memory import daily
from memory.documents import ScopeDocuments
from memory.semantic import SemanticMemory
from memory.semantic.embedders import Embedder, load_embedder
from policy import PolicyEngine
from transcripts import AuditLog, TranscriptStore
from transcripts.session import TranscriptSessions

log = logging.getLogger(__name__)


def halo_db(settings: Settings) -> HaloDB:
    """halo.db's tables: PostgreSQL when `storage.url` is set, else the file in HALO_HOME. A write
    left idle for a lease (a paused process) is ended by PostgreSQL, so a take never waits on it."""
    url = settings.storage.url.get_secret_value() if settings.storage.url else None
    return HaloDB(
        settings.paths.halo_db, url, family_id=settings.family_id, idle_seconds=settings.storage.lease_seconds
    )


def build_cluster(settings: Settings, db: HaloDB) -> Cluster | None:
    """On PostgreSQL, this process is one of those that may serve the family: active while it
    holds the family lease, else a warm standby. None on the embedded store (one process)."""
    if db.backend != "postgresql":
        return None
    address = settings.cluster.advertise_url or f"http://127.0.0.1:{settings.admin.port}"
    return Cluster(db, Node.here(address), settings.storage.lease_seconds)


def build_halo(settings: Settings, *, model: Model | None = None) -> Halo:
    """Wire every part from settings, in stages, each using only what the ones above built:
    stores, the family and its policy, memory, the turn, what sends, the adapters. `model`
    overrides the configured provider (bench, tests)."""
    # -- HALO_HOME and the stores
    paths = settings.paths
    make_private(paths.home)  # before anything is written: umask 077, and an older home fixed
    paths.ensure()
    write_default_soul(paths.soul)
    write_default_user_files(paths, settings.members)
    db = halo_db(settings)
    on_postgresql = db.backend == "postgresql"  # the store of record; HALO_HOME's files mirror it
    audit = AuditLog(paths.events_log, AuditRows(db) if on_postgresql else None)
    transcripts = TranscriptStore(paths.transcripts, records=TranscriptRows(db) if on_postgresql else None)
    record = memory_record(settings, db)  # PostgreSQL: the markdown memory's store of record; else None
    tasks = TaskStore(db)
    sessions = TranscriptSessions(
        transcripts, settings.sessions.history_token_budget, max_items=settings.sessions.history_max_items
    )

    # -- the family and its policy; the one outbox; who may join
    policy = PolicyEngine(settings.family_view(), extra_dir=paths.policies, audit=audit)
    family = LiveFamily(policy)
    live = LiveSettings(settings)  # routing, budget, prices, reminders: read at each use, reloaded live
    delivery = Delivery(db, transcripts, family.current, audit=audit)
    asks = Asks(db, delivery, family.current)  # decisions asked as buttons: what each button decides
    pairing = Pairing(db, FamilyEditor(paths, family), policy, delivery, audit, asks)
    groups = GroupGuard(db, policy, delivery, audit, asks)

    # -- the models and memory
    levels = build_levels(settings, db, model)  # L1–L3's models; every call's usage is recorded
    main_model = levels.metered(levels.main, "reply", Level.L2)
    extraction_model = levels.metered(levels.cheap, "extraction") if settings.memory.extractor == "llm" else None
    memory = build_memory(settings, policy, transcripts, extraction_model, record)
    semantic = build_semantic(settings)
    mirror, takers = scope_takers(record, memory.files, semantic, transcripts)  # a scope's memory here before first use
    memory.on_change.append(semantic.request_sync)  # a sync is queued after each distillation
    graph = build_graph(settings, memory, semantic, levels.sink("graph"))  # ingests scopes when they go quiet
    recall = Recall(semantic, audit)
    graph_recall = GraphRecall(graph, audit)
    memory_actions = MemoryActions(memory, audit)
    scope_documents = ScopeDocuments(memory.files)  # documents members sent, in each scope's files/
    documents = Documents(scope_documents, settings.memory, semantic, audit, delivery)

    # -- what sends besides replies: safety alerts, home events, approvals
    notifier = Notifier(family.current, delivery, audit)  # parents' web inbox and their other DMs
    safety = build_safety(settings, policy, notifier, audit, transcripts, levels)
    direct = DirectMessages(family.current, delivery.can_send)  # Telegram, else Discord, else the web inbox
    home = HomeEvents(  # MQTT → observations → home rules → Delivery
        settings.home_events,
        family.current,
        HomeStore(db, settings.home_events.keep_observations),
        policy,
        delivery,
        direct,
        audit,
        asks=asks,
    )
    reminder_store = ReminderStore(db)
    reminder_clock = ReminderScheduler(  # one timer fires due reminders into the outbox
        reminder_store,
        delivery,
        direct,
        family.current,
        quiet_until=home.quiet_until,
        audit=audit,
        settings=live.reminders,
        asks=asks,
    )
    reminders = Reminders(reminder_store, settings=live.reminders, wake=reminder_clock.wake)
    lists = Lists(ListStore(db))

    async def apply_config(new: Settings) -> None:
        """A reloaded, valid halo.yaml: the family (and the policy's view of it) and the home
        rules take effect now; ConfigReload then hands the other live keys to `live`. The rest
        waits for a restart."""
        write_default_user_files(paths, new.members, record)
        family.replace(new.family_view())  # every part reads the family from here
        await home.apply(new.home_events)
        if (new.budget, new.llm.prices) != (live.current().budget, live.current().llm.prices):
            say_unpriced(new, levels)

    config_record = ConfigRows(db) if db.backend == "postgresql" else None  # the family's versions
    config = ConfigReload(live, apply_config, record=config_record)
    approvals = Approvals(
        db, delivery, transcripts, family.current, audit, minutes=settings.tools.approval_minutes, asks=asks
    )

    # -- the turn: context, tools, the agents, commands, the gateway
    daily_section = daily.NOTES if settings.memory.distillation_enabled else daily.TRANSCRIPT
    persona, tone = PersonaSource(paths.soul), ProfileSource()
    memory_source = MemorySource(paths, daily_section=daily_section, sent_history=sessions.sent_history)
    context = ContextBuilder(
        [
            persona,
            DocumentSource(scope_documents, settings.memory.document_excerpt_tokens),
            tone,
            memory_source,
            RecallSource(recall, already_in_context=memory_files_in_context),
            graph_recall.source(),
        ],
        lean_sources=[persona, tone, memory_source],  # small talk (L1): halo/routing/plan.py
    )
    tools: list[Tool] = [
        *default_tools(),
        *message_tools(approvals, delivery, family.current),  # a parent approves each one
        *memory_tools(memory_actions),
        recall.tool(),
        graph_recall.tool(),
        *task_tools(tasks),
        *reminder_tools(reminders),
        *list_tools(lists),
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
    prices = Prices(live.prices)  # llm.prices on top of halo's defaults, read at each use
    router, budget = build_routing(
        settings, live, prices, levels, transcripts, partial(notifier.notify_parents, kind="budget"), family.current
    )
    commands = CommandRegistry(
        [
            *builtin_commands(
                registry=lambda: commands,  # /help lists the registry it is in
                llm=settings.llm,
                sessions=sessions,
                audit=audit,
                pairing=pairing,
                groups=groups,
                tools=lambda turn: [tool.name for tool in agents.offered_tools(turn)],
                whoami_lines=[reminders.who_may_i_remind],
            ),
            *memory_commands(memory_actions),
            *files_commands(documents),
            recall.command(),
            graph_recall.command(),
            *task_commands(tasks),
            *home_commands(home),
            *reminder_commands(reminders),
            *list_commands(lists),
            usage_command(levels.meter, prices),
        ]
    )
    # answered in code before any model is asked, in this order
    answerers: list[Answerer] = [in_code(documents.acknowledge)] if main_model is None else []  # say it was kept
    answerers += [
        StatusAnswers(
            tasks,
            paths,
            # routed: the task list answers at L0, worded by rules; else llm.model words the same facts
            model=levels.metered(levels.main, "status", Level.L2),
            routing=live.routing,
            model_settings=settings_for_model,
            tracing=settings.llm.tracing,
            deadline_seconds=settings.llm.timeout_seconds,
        ),
        in_code(approvals.answer),  # a parent's yes or no
    ]
    # L0: reminders, lists, "remember …" in plain words, while routing.plain_words is on
    answerers.append(
        PlainWords([ReminderWords(reminders), ListWords(lists), RememberWords(memory_actions)], live.routing)
    )
    model_health = ModelHealth()  # the last model failure until a call succeeds (/status)
    scope_locks = ScopeLocks()  # one turn at a time per scope; catch-up and admin scope work wait too
    gateway = Gateway(
        locks=scope_locks,
        resends=Resends(transcripts, sessions),
        admission=Admission(policy, groups, pairing, commands, tool_budget=settings.llm.max_tool_calls),
        intake=Intake(
            build_transcriber(settings.llm, levels.sink("transcription")), build_photo_reader(settings.llm), documents
        ),
        turn_log=TurnLog(transcripts, sessions, audit, routing=live.routing),
        safety=safety,
        guardrails=ChildGuardrails(safety),
        code_answers=CodeAnswers(commands, answerers),
        router=router,
        model_run=ModelRun(
            agents,
            sessions,
            memory,
            audit,
            settings.llm,
            model_health,
        ),
        after_turn=AfterTurn(
            [
                partial(
                    _keep_session_in_budget, sessions, levels.metered(levels.main, "distillation"), settings.llm.tracing
                ),
                memory_after_turn(memory),
                usage_after_turn(budget),
                partial(_index_later, semantic),
            ],
            memory,
            delivery,
        ),
        takers=takers,
    )
    admin_token = settings.admin.token.get_secret_value() if settings.admin.token else None
    unconfigured = UnconfiguredChats(db, delivery)
    # several processes on PostgreSQL: the one holding the family lease answers; the others forward
    cluster = build_cluster(settings, db)
    inbound = GatewayInbound(
        gateway,
        groups,
        commands,
        family.current,
        delivery,
        unconfigured,
        asks,
        audit,
        admin_token,
        suggestions=TaskSuggestions(tasks),
    )
    missed = MissedMessages(
        transcripts,
        gateway,
        inbound,
        delivery,
        family.current,
        audit,
        answer_within=timedelta(minutes=settings.sessions.answer_missed_minutes),
        apologise_within=timedelta(hours=settings.sessions.apologise_missed_hours),
    )

    # -- the adapters, each registered with the outbox that sends through it
    conversations = TranscriptConversations(transcripts, family.current)
    adapters = build_adapters(settings, inbound, db, audit, home, conversations)
    for adapter in adapters:
        if adapter.platform == "mqtt":  # home events in only; it sends nothing
            pass
        elif cluster is not None and not isinstance(adapter, LiveReplies):
            delivery.know(adapter.platform)  # a chat app sends from the active process (halo/inventory.py)
        else:
            delivery.register(adapter.platform, adapter)
        if isinstance(adapter, PresenceCheck):
            groups.register_presence(adapter.platform, adapter.still_in_chat)

    # -- schedules and the admin API's own parts
    digest = WorkDigest.from_family(family.current, tasks, partial(delivery.send, kind="digest"))
    backups = None
    if settings.backups.schedule:
        zone = settings.family.timezone
        storage_url = settings.storage.url.get_secret_value() if settings.storage.url else None
        backups = BackupSchedule(
            paths.home, paths.backups, settings.backups.schedule, settings.backups.keep, zone, storage_url=storage_url
        )
    scope_admin = ScopeAdmin(
        sessions=sessions,
        transcripts=transcripts,
        memory=memory,
        semantic=semantic,
        graph=graph,
        paths=paths,
        audit=audit,
        family=family.current,
    )
    # close_model closes only clients build_model made, once: a model passed in stays the caller's
    owned = [*levels.built, *safety.owned_models()]
    return Halo(
        settings=settings,
        paths=paths,
        transcripts=transcripts,
        sessions=sessions,
        audit=audit,
        db=db,
        live_family=family,
        policy=policy,
        pairing=pairing,
        groups=groups,
        scope_admin=scope_admin,
        memory=memory,
        semantic=semantic,
        graph=graph,
        recall=recall,
        graph_recall=graph_recall,
        documents=documents,
        memory_record=record,
        memory_mirror=mirror,
        scope_takers=takers,
        context=context,
        commands=commands,
        safety=safety,
        model=main_model,
        model_settings=settings_for_model,
        tools=tools,
        agents=agents,
        gateway=gateway,
        scope_locks=scope_locks,
        model_health=model_health,
        usage=levels.meter,
        inbound=inbound,
        delivery=delivery,
        notifier=notifier,
        approvals=approvals,
        home=home,
        reminders=reminders,
        reminder_clock=reminder_clock,
        lists=lists.store,
        config=config,
        tasks=tasks,
        digest=digest,
        backups=backups,
        missed=missed,
        adapters=adapters,
        cluster=cluster,
        forwarder=Forwarder() if cluster is not None else None,
        family_scopes=TranscriptRows(db).scope_ids if on_postgresql else None,
        closers=[levels.meter.store.close, audit.close, *(partial(close_model, m) for m in owned)],
    )


def build_adapters(
    settings: Settings,
    inbound: GatewayInbound,
    db: HaloDB,
    audit: AuditLog,
    home: HomeEvents,
    conversations: TranscriptConversations,
) -> list[Adapter]:
    """The web chat always; Telegram, Discord and MQTT when configured. Each is imported only
    when used, so a platform library halo does not need is never loaded."""
    from adapters.web import WebChatAdapter

    adapters: list[Adapter] = [WebChatAdapter(inbound, inbound, db, conversations)]
    if settings.telegram.token is not None:
        from adapters.telegram import TelegramAdapter

        adapters.append(TelegramAdapter(inbound, inbound, settings.telegram, db, audit, may_poll=db.holds_family))
    if settings.discord.token is not None:
        from adapters.discord import DiscordAdapter, SeenMessages

        adapters.append(DiscordAdapter(inbound, inbound, settings.discord, SeenMessages(db)))
    if settings.mqtt.host:
        from adapters.mqtt import MqttAdapter

        adapters.append(MqttAdapter(settings.mqtt, home))  # home events only: it sends nothing
    return adapters


async def _keep_session_in_budget(
    sessions: TranscriptSessions, model: Model | None, tracing: bool, turn: Turn, reply: Reply
) -> None:
    if reply.kind == "model":
        await compact_if_needed(sessions, turn.scope.id, model, tracing)


async def _index_later(semantic: SemanticMemory, turn: Turn, reply: Reply) -> None:
    semantic.mark_active(turn.scope.id)  # the next scheduled sync picks it up


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
