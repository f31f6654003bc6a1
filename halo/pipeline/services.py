"""The composition root's inventory of the parts it built (halo/runtime/app.py).

For the runtime itself, the CLI and the admin API. It is never handed to a turn, a command,
a tool or the gateway: each of those is given exactly the parts it uses when it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agents import ModelSettings

if TYPE_CHECKING:
    from agents import Model, Tool

    from config.family import Family
    from config.paths import HaloPaths
    from config.settings import Settings
    from halo.commands.builtin import CommandRegistry
    from halo.context.builder import ContextBuilder
    from halo.context.graph import GraphRecall
    from halo.context.recall import Recall
    from halo.family.groups import GroupGuard
    from halo.family.pairing import Pairing
    from halo.media.documents import Documents
    from halo.outbound.db import HaloDB
    from halo.outbound.delivery import Delivery
    from halo.safety.gate import SafetyGate
    from halo.safety.notify import Notifier
    from memory.graph.service import GraphMemory
    from memory.semantic import SemanticMemory
    from memory.service import MemoryService
    from policy import PolicyEngine
    from transcripts import AuditLog, TranscriptStore
    from transcripts.session import TranscriptSessions


@dataclass(slots=True)
class Services:
    settings: Settings
    paths: HaloPaths
    policy: PolicyEngine
    transcripts: TranscriptStore
    sessions: TranscriptSessions  # the model's history, read from `transcripts`
    audit: AuditLog
    context: ContextBuilder
    commands: CommandRegistry
    db: HaloDB
    delivery: Delivery
    pairing: Pairing
    groups: GroupGuard
    memory: MemoryService
    semantic: SemanticMemory  # built even when recall is off, so /status can say why
    notifier: Notifier
    safety: SafetyGate  # the child guardrails; a turn that is not a child's passes straight through
    model: Model | None
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    tools: list[Tool] = field(default_factory=list)
    graph: GraphMemory | None = None  # graph memory (memory.graph); built even when off, so /status can say why
    recall: Recall | None = None  # what a turn may search in the semantic index
    graph_recall: GraphRecall | None = None  # the same for graph memory
    documents: Documents | None = None  # documents members sent (/files, the admin API)

    @property
    def family(self) -> Family:
        """The live family: the policy engine is rebuilt when members change (halo/family/members.py).
        `settings` stays the start-up snapshot; read people and groups from here."""
        return self.policy.family
