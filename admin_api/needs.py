"""What the admin API needs of a built halo, in a few small Protocols, one per group of routes.

A route module asks for the one it uses (`scope_desk(request)`, …) and can reach nothing else;
`Halo` (halo/inventory.py) satisfies every one of them, and `create_app` takes `AdminHalo`,
their sum. A field the admin API starts to use is added here first, where a reader sees it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from config.family import Family
    from config.paths import HaloPaths
    from config.settings import Settings
    from halo.cluster.cluster import Cluster
    from halo.cluster.forward import Forwarder
    from halo.core.scope_locks import ScopeLocks
    from halo.family.pairing import Pairing
    from halo.family.scope_admin import ScopeAdmin
    from halo.home.events import HomeEvents
    from halo.lists.store import ListStore
    from halo.media.documents import Documents
    from halo.outbound.delivery import Delivery
    from halo.pipeline.gateway import Gateway
    from halo.pipeline.model_health import ModelHealth
    from halo.pipeline.turn_agents import TurnAgents
    from halo.port import Adapter
    from halo.reminders.firing import ReminderScheduler
    from halo.reminders.service import Reminders
    from halo.safety.notify import Notifier
    from halo.storage import HaloDB
    from halo.usage.meter import UsageMeter
    from halo.work.tasks import TaskStore
    from halo.workspace.config_reload import ConfigReload
    from memory.graph.service import GraphMemory
    from memory.semantic import SemanticMemory
    from memory.service import MemoryService
    from policy import PolicyEngine
    from transcripts import AuditLog, TranscriptStore
    from transcripts.session import TranscriptSessions


class ScopeDesk(Protocol):
    """A scope's session, transcript, memory and documents (routes/sessions, memory, files,
    events). On PostgreSQL a scope is taken before its memory is read or changed, and a change
    is acknowledged once the store of record has it."""

    scope_admin: ScopeAdmin
    sessions: TranscriptSessions
    transcripts: TranscriptStore
    audit: AuditLog
    memory: MemoryService
    graph: GraphMemory | None
    documents: Documents | None
    scope_locks: ScopeLocks

    async def take_scope(self, scope_id: str) -> None: ...

    async def memory_durable(self) -> None: ...


class FamilyDesk(Protocol):
    """The people: who they are, who may join, what the policy lets each do, what each is offered
    (routes/family, pairing, policy, login)."""

    settings: Settings
    pairing: Pairing
    policy: PolicyEngine
    notifier: Notifier
    agents: TurnAgents
    transcripts: TranscriptStore
    audit: AuditLog

    @property
    def family(self) -> Family: ...


class HouseholdDesk(Protocol):
    """The family's own things: home events, reminders and lists, tasks, usage, backups, and
    halo.yaml's reload (routes/home, reminders, tasks, usage, backups, config)."""

    settings: Settings
    paths: HaloPaths
    audit: AuditLog
    home: HomeEvents | None
    reminders: Reminders | None
    reminder_clock: ReminderScheduler | None
    lists: ListStore | None
    tasks: TaskStore | None
    usage: UsageMeter
    config: ConfigReload


class Front(Protocol):
    """The server itself: its health, the sign-in's store, the adapters' own routes, and on
    PostgreSQL this process's part and the forwarding to the active one (server.py,
    cluster_front.py, routes/health)."""

    paths: HaloPaths
    db: HaloDB
    adapters: list[Adapter]
    cluster: Cluster | None
    forwarder: Forwarder | None


class StatusSource(Front, Protocol):
    """Everything `/status` reports on (status.py)."""

    started_at: float
    config: ConfigReload
    pairing: Pairing
    policy: PolicyEngine
    agents: TurnAgents
    model_health: ModelHealth
    memory: MemoryService
    semantic: SemanticMemory
    graph: GraphMemory | None
    gateway: Gateway
    scope_locks: ScopeLocks
    delivery: Delivery

    @property
    def family(self) -> Family: ...

    def adapter_status(self) -> dict[str, Any]: ...

    def singleton(self, adapter: Adapter) -> bool: ...


class AdminHalo(ScopeDesk, FamilyDesk, HouseholdDesk, StatusSource, Protocol):
    """All the admin API uses: what `create_app` is given."""
