"""The inventory of a built halo: every part the composition root made (halo/runtime/app.py).

The runtime starts and closes these parts; the CLI and the admin API reach them from here.
It is never handed to a turn, a command, a tool or the gateway: each of those is given
exactly the parts it uses when it is built.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from halo.core.scope_takers import ScopeTakers
from halo.port import LiveReplies

if TYPE_CHECKING:
    from config.family import Family
    from config.paths import HaloPaths
    from config.settings import Settings
    from halo.cluster.cluster import Cluster
    from halo.cluster.forward import Forwarder
    from halo.commands.builtin import CommandRegistry
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
    from halo.parts import InBackground, Parts
    from halo.pipeline.gateway import Gateway
    from halo.pipeline.inbound import GatewayInbound
    from halo.pipeline.model_health import ModelHealth
    from halo.pipeline.turn_agents import TurnAgents
    from halo.port import Adapter
    from halo.reminders.firing import ReminderScheduler
    from halo.reminders.service import Reminders
    from halo.safety.gate import SafetyGate
    from halo.safety.notify import Notifier
    from halo.storage import HaloDB
    from halo.tools.approvals import Approvals
    from halo.usage.meter import UsageMeter
    from halo.work.digest import WorkDigest
    from halo.work.tasks import TaskStore
    from halo.workspace.config_reload import ConfigReload
    from memory.graph.service import GraphMemory
    from memory.semantic import SemanticMemory
    from memory.service import MemoryService
    from memory.store import MemoryStore
    from policy import PolicyEngine
    from transcripts import AuditLog, TranscriptStore
    from transcripts.session import TranscriptSessions

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Halo:
    """A built halo: its stores, its people, its turn, its outbox and its adapters, and the
    parts that run (`parts`: started and stopped as one, halo/parts.py)."""

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
    # the markdown memory: files in HALO_HOME, or on PostgreSQL its rows held by this process
    memory_store: MemoryStore | None = None
    scope_takers: ScopeTakers = field(default_factory=ScopeTakers)  # run before a scope's first use here
    # the turn: the agents hold its context, model, settings and tools (GET /policy/status)
    commands: CommandRegistry
    safety: SafetyGate  # the child guardrails; a turn that is not a child's passes straight through
    agents: TurnAgents
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
    catch_up: InBackground | None = None  # messages a crash left unanswered, caught up on start
    # adapters
    adapters: list[Adapter] = field(default_factory=list)
    # several processes on PostgreSQL: this process's part (active or standby), and the forwarding
    # of requests that reach a standby
    cluster: Cluster | None = None
    forwarder: Forwarder | None = None
    # what runs, in build order: started by `start`, stopped in reverse by `close`
    parts: Parts
    started_at: float = field(default_factory=time.time)

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
        return serves_only_when_active(adapter, self.cluster)

    async def start(self) -> None:
        """Embedded: serve at once. PostgreSQL: a warm standby (built, its database reached), which
        serves once it holds the family (`Parts.activate`, from the family lease)."""
        await self.parts.start()

    async def start_background(self, *, serving: bool = True) -> None:
        """The work behind the doors: the schema checked, extraction left over from before a
        restart, the semantic index's schedule, halo.yaml's watch. `serving`: this process writes
        the family's data from now on (the memory's rows held, the outbox, the schedules)."""
        await self.parts.start_background(serving=serving)

    async def start_alone(self) -> None:
        """`halo chat`: the work behind the doors and its serving part, as the one process serving
        the family (on PostgreSQL it takes the family lease; FamilyServedElsewhere when another
        process serves it)."""
        await self.parts.start_alone()

    async def hold_family(self) -> None:
        """A CLI command that writes the family's data (`halo distill`): on PostgreSQL it takes the
        family lease first (FamilyServedElsewhere when another process serves the family)."""
        await self.parts.hold_family()

    async def start_adapters(self) -> None:
        """The doors: the adapters (and the home rules, before MQTT); on PostgreSQL the family
        lease, which makes this process serve once it holds the family."""
        await self.parts.start_adapters()

    async def take_scope(self, scope_id: str) -> None:
        """Before the admin API reads or changes a scope's memory: what this process holds is current."""
        await self.scope_takers.ensure(scope_id, answering=False)

    async def memory_durable(self) -> None:
        """Every memory change made so far is in the store of record when this returns (the day's
        log lines held back included): the admin API awaits it before it acknowledges a change."""
        await self.memory.flush_log()
        if self.memory_store is not None:
            await self.memory_store.flush()

    def stopping(self) -> None:
        """What would hold up a stop ends now: documents being read are killed (their senders
        are told to send them again). Called first on shutdown, before anything is waited on."""
        if self.documents is not None:
            self.documents.close()

    async def close(self) -> None:
        """Every part that runs stops, in the reverse of its start; then what the root built is
        closed, in the reverse of its build (halo/parts.py)."""
        self.stopping()
        await self.parts.close()


def serves_only_when_active(adapter: Adapter, cluster: Cluster | None) -> bool:
    """On several processes a chat app and MQTT run on the active one only; the web chat (a
    person waits on it) on every process."""
    return cluster is not None and not isinstance(adapter, LiveReplies)
