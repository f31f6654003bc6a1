"""The table a parent reads to trust the setup: every member × every action × every configured scope.

Each action is asked the way halo asks it in practice: memory and tools from inside the
scope, `share` from the member's own DM into the scope, converse, transcript reads and
admin with no conversation around them. Decisions are probes (`audit=False`): nothing is
acted on, so nothing is written to the audit log, and the engine's memo makes a second
look free.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.family import Family, Member
from halo.core.envelope import Scope
from halo.core.scopes import member_scopes
from policy import SYSTEM, PolicyEngine, SystemPrincipal

# In the order a parent thinks of them; receive_proactive is asked of halo itself, not of a member.
MEMBER_ACTIONS: tuple[str, ...] = (
    "converse",
    "read_memory",
    "write_memory",
    "share",
    "ask_status",
    "use_tool",
    "read_transcript",
    "admin",
)
SYSTEM_ACTIONS: tuple[str, ...] = ("receive_proactive",)
_FROM_INSIDE = frozenset({"read_memory", "write_memory", "ask_status", "use_tool"})


@dataclass(frozen=True, slots=True)
class Cell:
    """One decision: may `principal` do `action` to the scope, asked from `from_scope`."""

    principal: str  # a member id, or "system:home"
    action: str
    allowed: bool
    policy_ids: tuple[str, ...]
    reason: str
    from_scope: str | None


@dataclass(frozen=True, slots=True)
class ScopeRow:
    scope: Scope
    cells: tuple[Cell, ...]


def policy_table(engine: PolicyEngine, family: Family) -> list[ScopeRow]:
    """Every configured scope with each member's decision for each action, and halo's own."""
    rows = []
    for scope in member_scopes(family):
        cells = [_member_cell(engine, member, action, scope) for member in family.members for action in MEMBER_ACTIONS]
        cells += [_cell(engine, SYSTEM, action, scope, None) for action in SYSTEM_ACTIONS]
        rows.append(ScopeRow(scope, tuple(cells)))
    return rows


def _member_cell(engine: PolicyEngine, member: Member, action: str, scope: Scope) -> Cell:
    from_scope: Scope | None = None
    if action in _FROM_INSIDE:
        from_scope = scope
    elif action == "share":
        from_scope = Scope(f"web:{member.id}", "dm", owner_id=member.id)
    return _cell(engine, member, action, scope, from_scope)


def _cell(
    engine: PolicyEngine, principal: Member | SystemPrincipal, action: str, scope: Scope, from_scope: Scope | None
) -> Cell:
    label = principal.id if isinstance(principal, Member) else principal.label
    origin = from_scope.id if from_scope else None
    try:
        decision = engine.decide(
            action,  # type: ignore[arg-type]
            principal=principal,
            resource=scope,
            from_scope=from_scope,
            audit=False,
        )
    except ValueError as exc:  # a request the schema does not allow: say so rather than hide the cell
        return Cell(label, action, False, (), f"not applicable: {exc}", origin)
    return Cell(label, action, decision.allowed, decision.policy_ids, decision.reason, origin)
