"""The composition root: the only module that knows every part and wires them together.

It builds a `Halo` (halo/inventory.py); the runtime starts and closes it."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

from agents import Model, ModelSettings, Tool

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
from halo.parts import InBackground, Part, Parts, adapter_part, resources, started, stopped_by
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
from halo.runtime.memory_wiring import build_memory, memory_after_turn, scope_takers
from halo.runtime.providers import build_model, close_model, model_settings, trace_only_when_asked
from halo.runtime.starter import write_default_soul, write_default_user_files
from halo.runtime.usage_wiring import Levels, build_levels, build_routing, say_unpriced, usage_after_turn
from halo.safety.classifier import RiskClassifier
from halo.safety.gate import SafetyGate
from halo.safety.notify import Notifier
from halo.safety.profiles import model_name
from halo.storage import HaloDB
from halo.storage.audit_rows import AuditRows
from halo.storage.config_rows import ConfigRows
from halo.storage.memory_rows import MemoryRows
from halo.storage.memory_store import RowMemory, has_served
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
from memory.scope_files import scope_ids_on_disk
from memory.semantic import SemanticMemory
from memory.semantic.embedders import Embedder, load_embedder
from memory.store import DiskMemory, MemoryStore
from policy import PolicyEngine
from transcripts import AuditLog, TranscriptStore
from transcripts.recorded import RecordedTranscripts
from transcripts.session import TranscriptSessions
from transcripts.store import scope_ids_in

if TYPE_CHECKING:  # the stages' fields only
    from config.paths import HaloPaths
    from halo.core.scope_takers import ScopeTakers
    from memory.graph.service import GraphMemory
    from memory.service import MemoryService

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


@dataclass(frozen=True, slots=True)
class Stores:
    """HALO_HOME and the stores every later stage writes through."""

    paths: HaloPaths
    db: HaloDB
    audit: AuditLog
    transcripts: TranscriptStore
    sessions: TranscriptSessions  # the model's history, read from `transcripts`
    memory: MemoryStore  # the markdown memory: files in HALO_HOME, or on PostgreSQL its rows held here
    tasks: TaskStore
    cluster: Cluster | None  # PostgreSQL: this process among those that may serve the family

    @property
    def on_postgresql(self) -> bool:
        return self.db.backend == "postgresql"

    @property
    def memory_rows(self) -> RowMemory | None:
        """PostgreSQL: the memory's rows, held by the process serving the family."""
        return self.memory if isinstance(self.memory, RowMemory) else None


@dataclass(frozen=True, slots=True)
class FamilyParts:
    """The family and its policy, the one outbox, and who may join."""

    policy: PolicyEngine
    family: LiveFamily
    live: LiveSettings  # routing, budget, prices, reminders: read at each use, reloaded live
    delivery: Delivery
    asks: Asks  # decisions asked as buttons: what each button decides
    pairing: Pairing
    groups: GroupGuard


@dataclass(frozen=True, slots=True)
class MemoryParts:
    """The models of each level, and the memory a turn reads and writes."""

    levels: Levels
    main_model: Model | None
    memory: MemoryService
    semantic: SemanticMemory
    takers: ScopeTakers
    graph: GraphMemory | None
    recall: Recall
    graph_recall: GraphRecall
    memory_actions: MemoryActions
    scope_documents: ScopeDocuments
    documents: Documents


@dataclass(frozen=True, slots=True)
class Senders:
    """What sends besides replies: safety alerts, home events, reminders, approvals."""

    notifier: Notifier
    safety: SafetyGate
    home: HomeEvents
    reminder_clock: ReminderScheduler
    reminders: Reminders
    lists: Lists
    config: ConfigReload
    approvals: Approvals


@dataclass(frozen=True, slots=True)
class TurnParts:
    """A message's path: the context, the tools, the agents, the commands and the gateway."""

    context: ContextBuilder
    tools: list[Tool]
    model_settings: ModelSettings
    agents: TurnAgents
    commands: CommandRegistry
    gateway: Gateway
    scope_locks: ScopeLocks
    model_health: ModelHealth


def build_halo(settings: Settings, *, model: Model | None = None) -> Halo:
    """Wire every part from settings, in stages, each given only what the ones before built:
    stores, the family and its policy, memory, what sends, the turn, the front doors (inbound,
    the adapters), the schedules. `model` overrides the configured provider (bench, tests)."""
    trace_only_when_asked(settings.llm)
    stores = build_stores(settings)
    fam = build_family(settings, stores)
    mem = build_memory_parts(settings, stores, fam, model)
    senders = build_senders(settings, stores, fam, mem)
    turn = build_turn(settings, stores, fam, mem, senders)
    db, paths, delivery = stores.db, stores.paths, fam.delivery

    # -- the front doors: inbound messages, the catch-up, the adapters
    admin_token = settings.admin.token.get_secret_value() if settings.admin.token else None
    # several processes on PostgreSQL: the one holding the family lease answers; the others forward
    cluster = stores.cluster
    inbound = GatewayInbound(
        turn.gateway,
        fam.groups,
        turn.commands,
        fam.family.current,
        delivery,
        UnconfiguredChats(db, delivery),
        fam.asks,
        stores.audit,
        admin_token,
        suggestions=TaskSuggestions(stores.tasks),
    )
    missed = MissedMessages(
        stores.transcripts,
        turn.gateway,
        inbound,
        delivery,
        fam.family.current,
        stores.audit,
        answer_within=timedelta(minutes=settings.sessions.answer_missed_minutes),
        apologise_within=timedelta(hours=settings.sessions.apologise_missed_hours),
    )
    conversations = TranscriptConversations(stores.transcripts, fam.family.current)
    adapters = build_adapters(settings, inbound, db, stores.audit, senders.home, conversations)
    register_adapters(adapters, delivery, fam.groups, clustered=cluster is not None)
    forwarder = Forwarder() if cluster is not None else None

    # -- schedules and the admin API's own parts
    digest = WorkDigest.from_family(fam.family.current, stores.tasks, partial(delivery.send, kind="digest"))
    scope_admin = ScopeAdmin(
        sessions=stores.sessions,
        transcripts=stores.transcripts,
        memory=mem.memory,
        semantic=mem.semantic,
        graph=mem.graph,
        paths=paths,
        audit=stores.audit,
        family=fam.family.current,
    )
    catch_up = InBackground("catch-up", missed.catch_up)  # a model call must not hold up the start

    # -- what runs, and what closes
    schedules = Schedules(build_backups(settings), digest, senders.approvals, senders.reminder_clock)
    parts = Parts(
        always_parts(stores, mem, senders, adapters, delivery),
        serving_parts(stores, mem, senders, schedules, adapters, delivery, catch_up, fam.family),
        built_resources(stores, fam, mem, senders, turn, forwarder),
        cluster,
    )
    return Halo(
        settings=settings,
        paths=paths,
        transcripts=stores.transcripts,
        sessions=stores.sessions,
        audit=stores.audit,
        db=db,
        live_family=fam.family,
        policy=fam.policy,
        pairing=fam.pairing,
        groups=fam.groups,
        scope_admin=scope_admin,
        memory=mem.memory,
        semantic=mem.semantic,
        graph=mem.graph,
        recall=mem.recall,
        graph_recall=mem.graph_recall,
        documents=mem.documents,
        memory_store=stores.memory,
        scope_takers=mem.takers,
        commands=turn.commands,
        safety=senders.safety,
        agents=turn.agents,
        gateway=turn.gateway,
        scope_locks=turn.scope_locks,
        model_health=turn.model_health,
        usage=mem.levels.meter,
        inbound=inbound,
        delivery=delivery,
        notifier=senders.notifier,
        approvals=senders.approvals,
        home=senders.home,
        reminders=senders.reminders,
        reminder_clock=senders.reminder_clock,
        lists=senders.lists.store,
        config=senders.config,
        tasks=stores.tasks,
        digest=digest,
        catch_up=catch_up,
        adapters=adapters,
        cluster=cluster,
        forwarder=forwarder,
        parts=parts,
    )


@dataclass(frozen=True, slots=True)
class Schedules:
    """What runs on a timer on the serving process (backups and the digest when configured)."""

    backups: BackupSchedule | None
    digest: WorkDigest | None
    approvals: Approvals
    reminder_clock: ReminderScheduler


def always_parts(
    stores: Stores, mem: MemoryParts, senders: Senders, adapters: list[Adapter], delivery: Delivery
) -> list[Part]:
    """What every process runs from its start to its stop, in start order (halo/parts.py)."""
    # PostgreSQL: the schema at its newest, or a clear stop
    parts = [Part("halo.db", partial(started, stores.db.prepare))]
    if stores.memory_rows is not None:
        parts.append(Part("memory rows", partial(started, stores.memory_rows.start)))  # its flush timer
    parts += [
        Part("memory", partial(started, mem.memory.start)),  # extraction left over from before a restart
        Part("semantic index", partial(started, mem.semantic.start)),  # its sync schedule
    ]
    if mem.graph is not None:
        parts.append(Part("graph memory", partial(started, mem.graph.start)))  # FalkorDB; never raises
    parts.append(
        Part("config reload", partial(stopped_by, senders.config.start, senders.config.close))
    )  # halo.yaml's edits applied from now on
    if stores.cluster is not None:  # an adapter a person waits on runs on every process (a standby forwards)
        parts += [adapter_part(a, delivery, sends_when_active=False) for a in adapters if isinstance(a, LiveReplies)]
    return parts


def serving_parts(
    stores: Stores,
    mem: MemoryParts,
    senders: Senders,
    schedules: Schedules,
    adapters: list[Adapter],
    delivery: Delivery,
    catch_up: InBackground,
    family: LiveFamily,
) -> list[Part]:
    """What only the process serving the family runs, in start order: entered when it takes the
    family (at once on the embedded store), left in reverse when it loses it or stops."""
    parts: list[Part] = []
    if (rows := stores.memory_rows) is not None:  # SOUL.md and USER.md held before the first turn reads them
        joined = partial(_join_memory, rows, family)
        parts.append(Part("memory", partial(stopped_by, joined, rows.release)))
    if stores.on_postgresql:  # every scope's copy here brought up to date from the store of record
        parts.append(Part("scopes taken", partial(mem.takers.holding, partial(_scopes_to_take, stores)), "take"))
    # what a previous run left in the outbox goes now; paused when this process stops serving (what
    # is pending stays for the process that serves next); `close`, a resource, ends it with the halo
    parts.append(Part("outbox", partial(stopped_by, delivery.start, delivery.pause)))
    if schedules.backups is not None:
        parts.append(Part("backups", partial(stopped_by, schedules.backups.start, schedules.backups.close), "schedule"))
    if schedules.digest is not None:
        parts.append(
            Part("work digest", partial(stopped_by, schedules.digest.start, schedules.digest.close), "schedule")
        )
    approvals = schedules.approvals
    parts += [
        Part("approvals", partial(stopped_by, approvals.start, approvals.close), "schedule"),  # lapsed on time
        Part(
            "reminder clock",
            partial(stopped_by, schedules.reminder_clock.start, schedules.reminder_clock.close),
            "schedule",
        ),  # after the outbox: what a crash left due goes now
        Part(
            "home rules", partial(stopped_by, senders.home.start, senders.home.stop), "door"
        ),  # before MQTT: the first observation finds the rules ready
    ]
    clustered = stores.cluster is not None
    for adapter in adapters:  # on several processes, the chat apps and MQTT; on one, every adapter
        if not clustered or not isinstance(adapter, LiveReplies):
            parts.append(adapter_part(adapter, delivery, sends_when_active=clustered and adapter.platform != "mqtt"))
    parts.append(Part("catch-up", catch_up.running, "catch-up"))  # what a crash left unanswered
    return parts


def built_resources(
    stores: Stores, fam: FamilyParts, mem: MemoryParts, senders: Senders, turn: TurnParts, forwarder: Forwarder | None
) -> AsyncExitStack:
    """What holds something open, in build order: closed in reverse when the halo closes, started
    or not. close_model closes only clients build_model made, once: a model passed in stays the
    caller's."""
    owned = [*mem.levels.built, *senders.safety.owned_models()]
    cluster = stores.cluster
    return resources(
        stores.db.close,
        *([cluster.stop] if cluster is not None else []),  # the lease lapses after every write below
        stores.audit.close,
        stores.transcripts.close,  # after delivery and memory: they may still append
        *([stores.memory_rows.close] if stores.memory_rows is not None else []),  # after memory's held-back writes
        fam.delivery.close,  # its attempts in flight finish; what is pending waits for the next start
        mem.levels.meter.store.close,  # usage rows written
        *(partial(close_model, m) for m in owned),  # the models' HTTP clients
        mem.semantic.close,
        mem.memory.close,
        *([mem.graph.close] if mem.graph is not None else []),  # stops the FalkorDB halo started
        turn.gateway.drain,  # after-turn work and its deliveries, before what they use closes
        *([forwarder.close] if forwarder is not None else []),
        senders.config.close,  # a reload asked while stopping ends first
    )


def build_stores(settings: Settings) -> Stores:
    """HALO_HOME made private and its defaults written, then halo.db and the stores on it, and
    on PostgreSQL this process's place among the family's (active or standby)."""
    paths = settings.paths
    make_private(paths.home)  # before anything is written: umask 077, and an older home fixed
    paths.ensure()
    db = halo_db(settings)
    on_postgresql = db.backend == "postgresql"  # the store of record
    memory: MemoryStore = RowMemory(MemoryRows(db), paths.home) if on_postgresql else DiskMemory(paths.home)
    write_default_soul(memory)  # on PostgreSQL once the family is held (`_join_memory`)
    write_default_user_files(memory, settings.members)
    transcripts = (
        RecordedTranscripts(
            TranscriptRows(db),
            paths.transcripts,  # what the home kept before storage.url: dealt with at each scope's first take
            from_record_only=has_served(paths.home, db),  # before this start joins
        )
        if on_postgresql
        else TranscriptStore(paths.transcripts)
    )
    return Stores(
        paths=paths,
        db=db,
        audit=AuditLog(record=AuditRows(db)) if on_postgresql else AuditLog(paths.events_log),
        transcripts=transcripts,
        sessions=TranscriptSessions(
            transcripts, settings.sessions.history_token_budget, max_items=settings.sessions.history_max_items
        ),
        memory=memory,
        tasks=TaskStore(db),
        cluster=build_cluster(settings, db),
    )


def build_family(settings: Settings, stores: Stores) -> FamilyParts:
    """The family and its policy (read live), the one outbox, pairing and the group guard."""
    db, audit = stores.db, stores.audit
    policy = PolicyEngine(settings.family_view(), extra_dir=stores.paths.policies, audit=audit)
    family = LiveFamily(policy)
    delivery = Delivery(db, stores.transcripts, family.current, audit=audit)
    asks = Asks(db, delivery, family.current)
    return FamilyParts(
        policy=policy,
        family=family,
        live=LiveSettings(settings),
        delivery=delivery,
        asks=asks,
        pairing=Pairing(db, FamilyEditor(stores.paths, family), policy, delivery, audit, asks),
        groups=GroupGuard(db, policy, delivery, audit, asks),
    )


def build_memory_parts(settings: Settings, stores: Stores, fam: FamilyParts, model: Model | None) -> MemoryParts:
    """L1–L3's models (every call's usage recorded), memory, the semantic index, graph memory,
    recall and the documents members sent."""
    levels = build_levels(settings, stores.db, model)
    extraction_model = levels.metered(levels.cheap, "extraction") if settings.memory.extractor == "llm" else None
    # before memory: it closes after memory's last sync request
    semantic = build_semantic(settings, stores.transcripts, stores.memory)
    memory = build_memory(settings, fam.policy, stores.transcripts, extraction_model, stores.memory)
    takers = scope_takers(stores.memory_rows, memory, semantic, stores.transcripts)  # before a scope's first use
    memory.on_change.append(semantic.request_sync)  # a sync is queued after each distillation
    graph = build_graph(settings, memory, semantic, levels.sink("graph"))  # ingests scopes when they go quiet
    scope_documents = ScopeDocuments(memory.files)  # documents members sent, in each scope's files/
    return MemoryParts(
        levels=levels,
        main_model=levels.metered(levels.main, "reply", Level.L2),
        memory=memory,
        semantic=semantic,
        takers=takers,
        graph=graph,
        recall=Recall(semantic, stores.audit),
        graph_recall=GraphRecall(graph, stores.audit),
        memory_actions=MemoryActions(memory, stores.audit),
        scope_documents=scope_documents,
        documents=Documents(scope_documents, settings.memory, semantic, stores.audit, fam.delivery),
    )


def build_senders(settings: Settings, stores: Stores, fam: FamilyParts, mem: MemoryParts) -> Senders:
    """What sends besides replies, and halo.yaml's live reload (it reaches the family and the home rules)."""
    db, audit, delivery, family, live = stores.db, stores.audit, fam.delivery, fam.family, fam.live
    notifier = Notifier(family.current, delivery, audit)  # parents' web inbox and their other DMs
    direct = DirectMessages(family.current, delivery.can_send)  # Telegram, else Discord, else the web inbox
    home = HomeEvents(  # MQTT → observations → home rules → Delivery
        settings.home_events,
        family.current,
        HomeStore(db, settings.home_events.keep_observations),
        fam.policy,
        delivery,
        direct,
        audit,
        asks=fam.asks,
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
        asks=fam.asks,
    )

    async def tell(member_id: str, text: str) -> None:
        """A message from halo to one member's own DM (a reminder they set was done)."""
        if (scope := direct.scope_of(member_id)) is not None:
            await delivery.send(scope.id, text, kind="notice", about=member_id)

    async def apply_config(new: Settings) -> None:
        """A reloaded, valid halo.yaml: the family (and the policy's view of it) and the home
        rules take effect now; ConfigReload then hands the other live keys to `live`. The rest
        waits for a restart."""
        write_default_user_files(stores.memory, new.members)
        family.replace(new.family_view())  # every part reads the family from here
        await home.apply(new.home_events)
        if (new.budget, new.llm.prices) != (live.current().budget, live.current().llm.prices):
            say_unpriced(new, mem.levels)

    config_record = ConfigRows(db) if stores.on_postgresql else None  # the family's versions
    return Senders(
        notifier=notifier,
        safety=build_safety(settings, fam.policy, notifier, audit, stores.transcripts, mem.levels),
        home=home,
        reminder_clock=reminder_clock,
        reminders=Reminders(reminder_store, settings=live.reminders, wake=reminder_clock.wake, tell=tell),
        lists=Lists(ListStore(db)),
        config=ConfigReload(live, apply_config, record=config_record),
        approvals=Approvals(
            db,
            delivery,
            stores.transcripts,
            family.current,
            audit,
            minutes=settings.tools.approval_minutes,
            asks=fam.asks,
        ),
    )


def build_turn(settings: Settings, stores: Stores, fam: FamilyParts, mem: MemoryParts, senders: Senders) -> TurnParts:
    """The context a model turn is given, the tools, the agents, the router, the commands and
    code answers, and the gateway that runs them in order."""
    sessions, audit, transcripts = stores.sessions, stores.audit, stores.transcripts
    family, live, levels = fam.family, fam.live, mem.levels
    approvals, reminders, lists, safety = senders.approvals, senders.reminders, senders.lists, senders.safety
    recall, graph_recall, memory_actions, documents = mem.recall, mem.graph_recall, mem.memory_actions, mem.documents
    daily_section = daily.NOTES if settings.memory.distillation_enabled else daily.TRANSCRIPT
    persona, tone = PersonaSource(stores.memory), ProfileSource()
    memory_source = MemorySource(stores.memory, daily_section=daily_section, sent_history=sessions.sent_history)
    context = ContextBuilder(
        [
            persona,
            DocumentSource(mem.scope_documents, settings.memory.document_excerpt_tokens),
            tone,
            memory_source,
            RecallSource(recall, already_in_context=memory_files_in_context),
            graph_recall.source(),
        ],
        lean_sources=[persona, tone, memory_source],  # small talk (L1): halo/routing/plan.py
    )
    tools: list[Tool] = [
        *default_tools(),
        *message_tools(approvals, fam.delivery, family.current),  # a parent approves each one
        *memory_tools(memory_actions),
        recall.tool(),
        graph_recall.tool(),
        *task_tools(stores.tasks),
        *reminder_tools(reminders),
        *list_tools(lists),
        *web_tools(PageFetcher()),  # "outward": the policy decides who may reach the web
        *web_search_tools(settings),
    ]
    settings_for_model = model_settings(settings.llm)
    agents = TurnAgents(
        context=context,
        policy=fam.policy,
        safety=safety,
        model=mem.main_model,
        model_settings=settings_for_model,
        tools=tools,
        levels=levels.reply_models(),
    )
    prices = Prices(live.prices)  # llm.prices on top of halo's defaults, read at each use
    router, budget = build_routing(
        settings,
        live,
        prices,
        levels,
        transcripts,
        partial(senders.notifier.notify_parents, kind="budget"),
        family.current,
    )
    commands = CommandRegistry(
        [
            *builtin_commands(
                registry=lambda: commands,  # /help lists the registry it is in
                llm=settings.llm,
                sessions=sessions,
                audit=audit,
                pairing=fam.pairing,
                groups=fam.groups,
                tools=lambda turn: [tool.name for tool in agents.offered_tools(turn)],
                whoami_lines=[reminders.who_may_i_remind],
            ),
            *memory_commands(memory_actions),
            *files_commands(documents),
            recall.command(),
            graph_recall.command(),
            *task_commands(stores.tasks),
            *home_commands(senders.home),
            *reminder_commands(reminders),
            *list_commands(lists),
            usage_command(levels.meter, prices),
        ]
    )
    # answered in code before any model is asked, in this order
    answerers: list[Answerer] = [in_code(documents.acknowledge)] if mem.main_model is None else []  # say it was kept
    answerers += [
        StatusAnswers(
            stores.tasks,
            stores.memory,
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
        admission=Admission(fam.policy, fam.groups, fam.pairing, commands, tool_budget=settings.llm.max_tool_calls),
        intake=Intake(
            build_transcriber(settings.llm, levels.sink("transcription")), build_photo_reader(settings.llm), documents
        ),
        turn_log=TurnLog(transcripts, sessions, audit, routing=live.routing),
        safety=safety,
        guardrails=ChildGuardrails(safety),
        code_answers=CodeAnswers(commands, answerers),
        router=router,
        model_run=ModelRun(agents, sessions, mem.memory, audit, settings.llm, model_health),
        after_turn=AfterTurn(
            [
                partial(
                    _keep_session_in_budget, sessions, levels.metered(levels.main, "distillation"), settings.llm.tracing
                ),
                memory_after_turn(mem.memory),
                usage_after_turn(budget),
                partial(_index_later, mem.semantic),
            ],
            mem.memory,
            fam.delivery,
        ),
        takers=mem.takers,
        memory=stores.memory,
    )
    return TurnParts(
        context=context,
        tools=tools,
        model_settings=settings_for_model,
        agents=agents,
        commands=commands,
        gateway=gateway,
        scope_locks=scope_locks,
        model_health=model_health,
    )


def register_adapters(adapters: list[Adapter], delivery: Delivery, groups: GroupGuard, *, clustered: bool) -> None:
    """Each adapter registered with the outbox that sends through it (a chat app's, on several
    processes, only on the active one: halo/inventory.py), and with the group guard when it can
    say who is still in a chat."""
    for adapter in adapters:
        if adapter.platform == "mqtt":  # home events in only; it sends nothing
            pass
        elif clustered and not isinstance(adapter, LiveReplies):
            delivery.know(adapter.platform)
        else:
            delivery.register(adapter.platform, adapter)
        if isinstance(adapter, PresenceCheck):
            groups.register_presence(adapter.platform, adapter.still_in_chat)


def build_backups(settings: Settings) -> BackupSchedule | None:
    """backups.schedule, when set."""
    schedule, keep = settings.backups.schedule, settings.backups.keep
    if not schedule:
        return None
    storage_url = settings.storage.url.get_secret_value() if settings.storage.url else None
    zone = settings.family.timezone
    return BackupSchedule(settings.paths.home, settings.paths.backups, schedule, keep, zone, storage_url=storage_url)


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


async def _join_memory(rows: RowMemory, family: LiveFamily) -> None:
    """The family taken: its memory's own files held here, and SOUL.md and USER.md written if
    the family has none yet (its first start on PostgreSQL)."""
    await rows.join()
    write_default_soul(rows)
    write_default_user_files(rows, family.current().members)


async def _scopes_to_take(stores: Stores) -> list[str]:
    """Every scope PostgreSQL has lines of, and every scope this home has a transcript file of
    (its lines recorded, or the file removed: `RecordedTranscripts._home_file`) or a memory
    folder of (one purged through another process goes)."""
    recorded = await TranscriptRows(stores.db).scope_ids()
    files = await asyncio.to_thread(scope_ids_in, stores.paths.transcripts)
    folders = await asyncio.to_thread(scope_ids_on_disk, stores.paths.scopes)
    return sorted({*recorded, *files, *folders})


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


def build_semantic(settings: Settings, transcripts: TranscriptStore, memory: MemoryStore) -> SemanticMemory:
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

    service = SemanticMemory(settings.paths, semantic, embedder_loader=loader, transcripts=transcripts, memory=memory)
    service.say_problems()
    return service
