"""The inventory of a built halo: every part the composition root made (halo/runtime/app.py).

The runtime starts and closes these parts; the CLI and the admin API reach them from here.
It is never handed to a turn, a command, a tool or the gateway: each of those is given
exactly the parts it uses when it is built.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents import ModelSettings

from halo.core.scope_takers import ScopeTakers
from halo.port import LiveReplies

if TYPE_CHECKING:
    from agents import Model, Tool

    from config.family import Family
    from config.paths import HaloPaths
    from config.settings import Settings
    from halo.cluster.cluster import Cluster
    from halo.cluster.forward import Forwarder
    from halo.commands.builtin import CommandRegistry
    from halo.context.builder import ContextBuilder
    from halo.context.graph import GraphRecall
    from halo.context.recall import Recall
    from halo.core.live_family import LiveFamily
    from halo.core.scope_locks import ScopeLocks
    from halo.family.groups import GroupGuard
    from halo.family.pairing import Pairing
    from halo.family.scope_admin import ScopeAdmin
    from halo.home.events import HomeEvents
    from halo.lists.store import ListStore
    from halo.media.documents import Documents
    from halo.outbound.delivery import Delivery
    from halo.pipeline.gateway import Gateway
    from halo.pipeline.inbound import GatewayInbound
    from halo.pipeline.missed import CatchUp, MissedMessages
    from halo.pipeline.model_health import ModelHealth
    from halo.pipeline.turn_agents import TurnAgents
    from halo.port import Adapter
    from halo.reminders.firing import ReminderScheduler
    from halo.reminders.service import Reminders
    from halo.safety.gate import SafetyGate
    from halo.safety.notify import Notifier
    from halo.storage import HaloDB
    from halo.storage.memory_mirror import MemoryMirror, RecordedFiles
    from halo.tools.approvals import Approvals
    from halo.usage.meter import UsageMeter
    from halo.work.digest import WorkDigest
    from halo.work.tasks import TaskStore
    from halo.workspace.backups import BackupSchedule
    from halo.workspace.config_reload import ConfigReload
    from memory.graph.service import GraphMemory
    from memory.semantic import SemanticMemory
    from memory.service import MemoryService
    from policy import PolicyEngine
    from transcripts import AuditLog, TranscriptStore
    from transcripts.session import TranscriptSessions

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Halo:
    """A built halo: its stores, its people, its turn, its outbox and its adapters."""

    settings: Settings  # the start-up snapshot; read people and groups from `family`
    paths: HaloPaths
    # stores
    transcripts: TranscriptStore
    sessions: TranscriptSessions  # the model's history, read from `transcripts`
    audit: AuditLog
    db: HaloDB
    # the family and the policy
    live_family: LiveFamily
    policy: PolicyEngine
    pairing: Pairing
    groups: GroupGuard
    scope_admin: ScopeAdmin  # look at, clear and purge whole scopes (admin API)
    # memory
    memory: MemoryService
    semantic: SemanticMemory  # built even when recall is off, so /status can say why
    graph: GraphMemory | None = None  # built even when off, so /status can say why
    recall: Recall | None = None  # what a turn may search in the semantic index
    graph_recall: GraphRecall | None = None  # the same for graph memory
    documents: Documents | None = None  # documents members sent (/files, the admin API)
    # PostgreSQL (storage.url): the markdown memory's store of record, and this HALO_HOME its mirror
    memory_record: RecordedFiles | None = None  # every memory write reaches PostgreSQL through it
    memory_mirror: MemoryMirror | None = None  # a scope's files (and index) from PostgreSQL when taken
    scope_takers: ScopeTakers = field(default_factory=ScopeTakers)  # run before a scope's first use here
    # the turn
    context: ContextBuilder
    commands: CommandRegistry
    safety: SafetyGate  # the child guardrails; a turn that is not a child's passes straight through
    model: Model | None
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    tools: list[Tool] = field(default_factory=list)
    agents: TurnAgents  # the agent a turn runs, and the tools it is offered (GET /policy/status)
    gateway: Gateway
    scope_locks: ScopeLocks  # the gateway's, the catch-up's and the admin API's (clear, purge)
    model_health: ModelHealth  # the last model failure until a call succeeds (/status)
    usage: UsageMeter  # every model call's reported usage, and its store (GET /usage)
    inbound: GatewayInbound
    # outbound and what sends through it
    delivery: Delivery
    notifier: Notifier
    approvals: Approvals | None = None  # consequential tool calls waiting for a parent
    home: HomeEvents | None = None  # home rules, quiet-hours queue (fed by the MQTT adapter)
    reminders: Reminders | None = None  # /remind and the reminder tools (GET /reminders)
    reminder_clock: ReminderScheduler | None = None  # fires due reminders through the outbox
    lists: ListStore | None = None  # each scope's lists (GET /lists)
    config: ConfigReload  # halo.yaml edits, applied live
    tasks: TaskStore | None = None  # the work task list (GET /tasks, the dashboard's Tasks panel)
    digest: WorkDigest | None = None  # work.digest's schedule, when configured
    backups: BackupSchedule | None = None  # backups.schedule, when set
    missed: MissedMessages | None = None  # messages a crash left unanswered, caught up on start
    # adapters
    adapters: list[Adapter] = field(default_factory=list)
    # several processes on PostgreSQL: this process's part (active or standby), the forwarding of
    # requests that reach a standby, and every scope with a transcript (taken when it turns active)
    cluster: Cluster | None = None
    forwarder: Forwarder | None = None
    family_scopes: Callable[[], Awaitable[list[str]]] | None = None
    # the composition root's own clean-up, run last (the HTTP clients of the models it built)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    catching_up: asyncio.Task[CatchUp] | None = None

    @property
    def family(self) -> Family:
        """The live family (a pairing approval or a config reload replaces it)."""
        return self.live_family.current()

    def adapter_status(self) -> dict[str, Any]:
        return {a.platform: a.status() for a in self.adapters}

    def singleton(self, adapter: Adapter) -> bool:
        """Runs on the active process only (several processes): a chat app's polling or gateway,
        MQTT. An adapter a person waits on (the web chat) runs on every process; a standby's
        requests are forwarded to the active one before they reach it (halo/cluster/forward.py)."""
        return self.cluster is not None and not isinstance(adapter, LiveReplies)

    async def start(self) -> None:
        """Embedded: serve at once. PostgreSQL: a warm standby (built, its database reached), which
        serves once it holds the family (`activate`, from the family lease)."""
        if self.cluster is None:
            await self.start_background()
            await self.start_adapters()
            self._catch_up()
            return
        await self.start_background(serving=False)
        await self.start_adapters()  # and joins the family's processes: a standby until it holds the family

    def _catch_up(self) -> None:
        if self.missed is not None:  # in the background: a model call must not hold up the start
            self.catching_up = asyncio.create_task(self.missed.catch_up())

    async def start_background(self, *, serving: bool = True) -> None:
        """Work that needs a running loop: extraction left over from before a restart, and
        the semantic index's sync schedule. `serving`: this process writes the family's data
        from now on (the outbox, the memory mirror's first upload); a standby does neither."""
        await self.db.prepare()  # PostgreSQL: the schema at its newest, or a clear stop
        if self.memory_record is not None:
            await self.memory_record.start()
        if serving and self.memory_mirror is not None:
            await self.memory_mirror.join()  # SOUL.md and USER.md before the first turn reads them
        await self.memory.start()
        await self.semantic.start()
        if serving:
            await self.delivery.start()  # what a previous run left in the outbox goes now
        if self.graph is not None:
            await self.graph.start()  # FalkorDB (its own, or memory.graph.url); never raises
        self.config.start()  # from now on, an edit to halo.yaml is applied without a restart
        if self.cluster is None:
            await self.start_singletons(adapters=False)

    async def start_adapters(self) -> None:
        if self.home is not None and self.cluster is None:
            await self.home.start()  # before MQTT: the first observation finds the rules ready
        for adapter in self.adapters:
            if not self.singleton(adapter):
                await adapter.start()
        if self.cluster is not None and not self.cluster.started:  # the chat apps and schedules: once active
            await self.cluster.start(self.activate, self.deactivate)

    async def activate(self) -> None:
        """This process took the family (its writes carry the new epoch): every scope's copy here
        is brought up to date from the store of record, then the outbox, the home rules, the
        chat apps and the schedules start, and what a dead process left unanswered is caught up."""
        if self.memory_mirror is not None:
            await self.memory_mirror.join()
        self.scope_takers.release_all()
        for scope_id in await self.family_scopes() if self.family_scopes is not None else ():
            await self.scope_takers.ensure(scope_id)
        await self.delivery.start()
        if self.home is not None:
            await self.home.start()
        await self.start_singletons()
        self._catch_up()
        log.warning("serving the family: the outbox, the chat apps and the schedules run here")

    async def deactivate(self) -> None:
        """This process no longer holds the family (stale, cut off, or stopping): it stops polling,
        sending and scheduling; nothing it still tries to write gets past the fence."""
        if self.catching_up is not None and not self.catching_up.done():
            self.catching_up.cancel()
            await asyncio.gather(self.catching_up, return_exceptions=True)
        await self.stop_singletons()
        if self.home is not None:
            await self.home.stop()
        await self.delivery.pause()
        self.scope_takers.release_all()  # another process writes them now: taken again before next use

    async def start_singletons(self, *, adapters: bool = True) -> None:
        """What runs on one process at a time: the schedules, and (several processes) the chat
        apps' adapters, which then send for their platforms from here."""
        if self.backups is not None:
            self.backups.start()
        if self.digest is not None:
            self.digest.start()
        if self.approvals is not None:
            self.approvals.start()
        if self.reminder_clock is not None:
            self.reminder_clock.start()  # after the outbox: what a crash left due goes now, marked late
        for adapter in self.adapters if adapters else ():
            if self.singleton(adapter):
                if adapter.platform != "mqtt":
                    self.delivery.register(adapter.platform, adapter)
                await adapter.start()

    async def stop_singletons(self) -> None:
        """Serving ends (a clean stop, or the family lost): another process takes over."""
        for adapter in reversed(self.adapters):
            if self.singleton(adapter):
                try:  # it finishes the updates in hand, and their replies go out through it
                    await adapter.stop()
                except Exception:
                    log.exception("stopping adapter %s failed", adapter.platform)
                self.delivery.unregister(adapter.platform)  # then what is queued waits for the next active process
        if self.backups is not None:
            self.backups.close()
        if self.approvals is not None:
            await self.approvals.close()
        if self.digest is not None:
            self.digest.close()
        if self.reminder_clock is not None:
            await self.reminder_clock.close()

    async def take_scope(self, scope_id: str) -> None:
        """Before the admin API reads or changes a scope's memory: this process's copy is current."""
        await self.scope_takers.ensure(scope_id)

    async def memory_durable(self) -> None:
        """Every memory change made so far is in the store of record (PostgreSQL) when this returns:
        the admin API awaits it before it acknowledges a change. On the embedded store the files are."""
        if self.memory_record is not None:
            await self.memory.flush_log()
            await self.memory_record.flush()

    def stopping(self) -> None:
        """What would hold up a stop ends now: documents being read are killed (their senders
        are told to send them again). Called first on shutdown, before anything is waited on."""
        if self.documents is not None:
            self.documents.close()

    async def close(self) -> None:
        self.stopping()
        if self.catching_up is not None and not self.catching_up.done():
            self.catching_up.cancel()  # what it did not reach is still open, and caught up next start
            await asyncio.gather(self.catching_up, return_exceptions=True)
        await self.config.close()
        serving = self.cluster is None or self.cluster.active
        if self.cluster is not None:
            await self.cluster.closing()  # it keeps renewing, but takes nothing and starts nothing now
            if serving:
                await self.stop_singletons()  # the chat apps stop polling first: no new messages
        for adapter in reversed(self.adapters):
            if self.singleton(adapter):
                continue
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping adapter %s failed", adapter.platform)
        if self.home is not None and serving:
            await self.home.stop()
        await self.gateway.drain()
        if self.cluster is None:
            await self.stop_singletons()
        if self.forwarder is not None:
            await self.forwarder.close()
        await self.delivery.close()
        await self.memory.close()
        if self.memory_record is not None:
            await self.memory_record.close()  # after memory's own held-back writes
        await self.semantic.close()
        if self.graph is not None:
            await self.graph.close()  # stops the FalkorDB halo started
        self.transcripts.close()  # last: delivery and memory above may still append
        for close in self.closers:  # the root's own: usage rows written, the models' HTTP clients closed
            await close()
        if self.cluster is not None:  # every write above went out under this epoch: the lease lapses now
            await self.cluster.stop()
        await self.db.close()
