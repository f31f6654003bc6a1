"""The policy engine: every permission halo enforces is decided here, in code, by Cedar.

The schema, the policy set and the members' entities are parsed once (and again on
`rebuild`); a decision only adds the one or two scopes it is about to the entity set,
and decisions are memoised until the next rebuild. Audit happens on every call.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import cedarpy
from cedarpy import pst

from config.family import Family, Member
from policy.entities import (
    GROUP_TYPES,
    SYSTEM,
    ScopeRef,
    SystemPrincipal,
    base_entities,
    scope_entity,
    scope_ref,
    uid,
)
from policy.loader import PolicyError, PolicyInfo, load_policies, load_schema

__all__ = [
    "ACTIONS",
    "SYSTEM",
    "Action",
    "AuditSink",
    "Decision",
    "PolicyEngine",
    "PolicyError",
    "PolicyInfo",
    "ScopeLike",
    "ScopeRef",
    "SystemPrincipal",
    "explain",
    "scope_ref",
]

Action = Literal[
    "converse",
    "read_memory",
    "write_memory",
    "share",
    "ask_status",
    "receive_proactive",
    "use_tool",
    "admin",
    "read_transcript",
    "remind",
]
ACTIONS: frozenset[str] = frozenset(get_args(Action))

POLICY_DIR = Path(__file__).parent
SCHEMA_PATH = POLICY_DIR / "schema.cedarschema"
CACHE_SIZE = 8192

# Actions that happen *in* the resource scope: without a from_scope, the request comes from there.
_FROM_RESOURCE = frozenset({"use_tool", "ask_status"})
# Actions that carry `in_scope` (may the principal converse where the request is made from?).
_NEEDS_IN_SCOPE = ACTIONS - {"converse", "receive_proactive"}
_RESERVED_CONTEXT = frozenset({"from_scope", "in_scope"})

_Key = tuple[str, str]  # (entity type, id)
_Context = tuple[tuple[str, Any], ...]  # the caller's context, sorted, hashable


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one request, with the policies that decided it and why."""

    allowed: bool
    action: str
    principal: str  # member id, "unknown:<platform id>" or "system:home"
    resource: str  # scope id or "member:<id>"
    policy_ids: tuple[str, ...]  # the @id of every policy that decided it
    reason: str
    from_scope: str | None = None  # the scope the request was made from
    errors: tuple[str, ...] = ()  # policies cedar could not evaluate (they decided nothing)
    policies: tuple[PolicyInfo, ...] = ()  # the deciding policies in full, for `explain`


class ScopeLike(Protocol):
    """Anything shaped like a scope: ScopeRef, or halo's own `Scope`. A missing `configured`
    counts as False for a group (untrusted until named), True otherwise; a missing
    `suspended` as False."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def owner_id(self) -> str | None: ...


class AuditSink(Protocol):
    """Where decisions are recorded (logs/events.jsonl). Must not drop events silently."""

    def write(self, kind: str, **fields: Any) -> None: ...


class PolicyEngine:
    """Decides (principal, action, resource, from_scope, context) with the family's Cedar policies.

    Loads `policy/*.cedar` shipped with halo, then `extra_dir/*.cedar` (the family's own,
    `$HALO_HOME/policies/`), all validated against `policy/schema.cedarschema`; any mistake
    raises PolicyError naming the file and line.
    """

    def __init__(self, family: Family, *, extra_dir: Path | None = None, audit: AuditSink | None = None) -> None:
        files = sorted(POLICY_DIR.glob("*.cedar"))
        if extra_dir is not None and extra_dir.is_dir():
            files += sorted(extra_dir.glob("*.cedar"))
        self._rules = _Rules.load(files)
        self._audit = audit
        self._snapshot = _Snapshot(self._rules, family)
        self.generation = 0  # counts rebuilds: what was decided before one may not hold after it

    @property
    def policies(self) -> tuple[PolicyInfo, ...]:
        """Every loaded policy, shipped ones first, in file order."""
        return tuple(self._rules.infos.values())

    def rebuild(self, family: Family) -> None:
        """Take new members and groups into account without a restart; forgets memoised decisions."""
        self._snapshot = _Snapshot(self._rules, family)
        self.generation += 1

    def decide(
        self,
        action: Action,
        *,
        principal: Member | SystemPrincipal | None,
        resource: ScopeLike | Member | SystemPrincipal,
        from_scope: ScopeLike | None = None,
        unknown_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        audit: bool = True,
    ) -> Decision:
        """Allow or deny. `principal=None` is an unknown sender (`unknown_id`: their platform id),
        except for `receive_proactive`, where it means halo itself (same as `SYSTEM`).
        `from_scope` is where the conversation is; for use_tool and ask_status it defaults to
        the resource. `audit=False` is for probes that act on nothing (`/whoami`, `halo policy
        explain`). A request that does not fit the schema raises ValueError."""
        if action not in ACTIONS:
            raise ValueError(f"unknown policy action {action!r}; expected one of {sorted(ACTIONS)}")
        ctx: _Context = ()
        if context:
            reserved = _RESERVED_CONTEXT.intersection(context)
            if reserved:
                raise ValueError(f"context may not set {sorted(reserved)}: the engine sets them")
            ctx = tuple(sorted(context.items()))
        target: ScopeRef | _Key
        if isinstance(resource, Member):
            target = ("Member", resource.id)
        elif isinstance(resource, SystemPrincipal):
            target = ("System", resource.id)
        else:
            target = _scope_ref(resource)
        origin = _scope_ref(from_scope) if from_scope is not None else None
        if origin is None and action in _FROM_RESOURCE and isinstance(target, ScopeRef):
            origin = target
        snapshot = self._snapshot
        decision = snapshot.evaluate(action, snapshot.principal_key(action, principal, unknown_id), target, origin, ctx)
        if audit and self._audit is not None and (not decision.allowed or action != "converse"):
            self._audit.write(
                "policy",
                principal=decision.principal,
                action=decision.action,
                resource=decision.resource,
                from_scope=decision.from_scope,
                allowed=decision.allowed,
                policy_ids=list(decision.policy_ids),
                reason=decision.reason,
            )
        return decision

    @property
    def family(self) -> Family:
        """The family the engine currently decides for (the one given to the last rebuild)."""
        return self._snapshot.family

    def explain(self, decision: Decision) -> str:
        """Several lines for `halo policy explain` and the admin page (same as `explain`)."""
        return explain(decision)


def explain(decision: Decision) -> str:
    """Several lines for `halo policy explain` and the admin page: verdict, reason, and
    each deciding policy with its effect, file and line."""
    verdict = "ALLOW" if decision.allowed else "DENY"
    where = f" (from {decision.from_scope})" if decision.from_scope else ""
    lines = [
        f"{verdict}: {decision.principal} {decision.action} {decision.resource}{where}",
        f"  reason: {decision.reason}",
    ]
    if decision.policy_ids:
        lines.append("  decided by:")
        known = {info.id: info for info in decision.policies}
        for policy_id in decision.policy_ids:
            info = known.get(policy_id)
            if info is None:
                lines.append(f"    {policy_id}")
                continue
            lines.append(f"    {info.effect} {policy_id}  ({_display(info.path)} line {info.line})")
            if info.reason:
                lines.append(f"      {info.reason}")
    else:
        lines.append("  decided by: no policy permits this (default deny)")
    if decision.errors:
        lines.append("  not evaluated (errors):")
        lines.extend(f"    {error}" for error in decision.errors)
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class _Rules:
    """The schema and the policies, parsed once. Cedar evaluates every policy in a set, so
    each action gets its own set holding only the policies whose scope can match it."""

    schema: cedarpy.Schema
    by_action: Mapping[str, cedarpy.PolicySet]
    infos: Mapping[str, PolicyInfo]
    order: Mapping[str, int]

    @classmethod
    def load(cls, files: list[Path]) -> _Rules:
        """Parsed once per set of file contents: a reload that changed no policy, and every halo a
        process builds after the first (the test suite builds hundreds), reuse the parse."""
        return _parsed(tuple((path, path.read_bytes()) for path in [SCHEMA_PATH, *files]))

    @classmethod
    def parse(cls, files: list[Path]) -> _Rules:
        schema = load_schema(SCHEMA_PATH)
        policy_set, infos = load_policies(files, schema)
        policies = policy_set.to_pst().static_policies
        by_action = {
            action: cedarpy.PolicySet.from_pst(
                pst.PolicySet(
                    templates={},
                    static_policies={k: p for k, p in policies.items() if _applies(p.action, action)},
                    template_links=(),
                )
            )
            for action in ACTIONS
        }
        return cls(schema, by_action, {i.id: i for i in infos}, {i.id: n for n, i in enumerate(infos)})

    def reason(self, policy_id: str) -> str:
        info = self.infos.get(policy_id)
        if info is None or not info.reason:
            return f"Policy {policy_id} applies."
        return info.reason


@functools.lru_cache(maxsize=8)
def _parsed(contents: tuple[tuple[Path, bytes], ...]) -> _Rules:
    return _Rules.parse([path for path, _ in contents[1:]])


def _applies(constraint: pst.ActionConstraint, action: str) -> bool:
    if isinstance(constraint, pst.ActionEq):
        return constraint.entity.id == action
    if isinstance(constraint, pst.ActionIn):  # the schema has no action groups: `in` is membership
        return any(entity.id == action for entity in constraint.entities)
    return True


class _Snapshot:
    """Everything derived from one Family, with its caches; replaced as a whole on rebuild."""

    def __init__(self, rules: _Rules, family: Family) -> None:
        self._rules = rules
        self.family = family
        self.member_ids = frozenset(m.id for m in family.members)
        self._base = cedarpy.Entities.from_json_str(json.dumps(base_entities(family)), rules.schema)
        self.evaluate = functools.lru_cache(maxsize=CACHE_SIZE)(self._evaluate)
        self._entities = functools.lru_cache(maxsize=CACHE_SIZE)(self._with_scopes)

    def principal_key(self, action: str, principal: Member | SystemPrincipal | None, unknown_id: str | None) -> _Key:
        if isinstance(principal, SystemPrincipal):
            return ("System", principal.id)
        if principal is None:
            if action == "receive_proactive":
                return ("System", SYSTEM.id)
            return ("Unknown", unknown_id or "anonymous")
        if principal.id not in self.member_ids:
            # Not (or no longer) in halo.yaml: whatever the object says, it is nobody we know.
            return ("Unknown", f"member:{principal.id}")
        return ("Member", principal.id)

    def _with_scopes(self, scopes: tuple[ScopeRef, ...]) -> cedarpy.Entities:
        """The members plus the scopes one request is about (parsed once per combination)."""
        if not scopes:
            return self._base
        delta = [scope_entity(scope, self.member_ids) for scope in scopes]
        return self._base.with_added_json_str(json.dumps(delta))

    def _evaluate(
        self,
        action: str,
        principal: _Key,
        resource: ScopeRef | _Key,
        from_scope: ScopeRef | None,
        ctx: _Context,
    ) -> Decision:
        context: dict[str, Any] = dict(ctx)
        scopes: dict[str, ScopeRef] = {}
        if isinstance(resource, ScopeRef):
            scopes[resource.id] = resource
            resource_uid, resource_label = uid("Scope", resource.id), resource.id
        else:
            resource_uid, resource_label = uid(*resource), _resource_label(resource)
        if from_scope is not None:
            if scopes.get(from_scope.id, from_scope) != from_scope:
                raise ValueError(f"resource and from_scope disagree about scope {from_scope.id!r}")
            scopes[from_scope.id] = from_scope
            context["from_scope"] = {"__entity": uid("Scope", from_scope.id)}
            if action in _NEEDS_IN_SCOPE:
                context["in_scope"] = self.evaluate("converse", principal, from_scope, None, ()).allowed
        request = {
            "principal": uid(*principal),
            "action": {"type": "Halo::Action", "id": action},
            "resource": resource_uid,
            "context": context,
        }
        result = cedarpy.is_authorized(
            request, self._rules.by_action[action], self._entities(tuple(scopes.values())), self._rules.schema
        )
        principal_label = _principal_label(principal)
        if result.decision is cedarpy.Decision.NoDecision:
            raise ValueError(
                f"invalid policy request ({principal_label} {action} {resource_label}): "
                + "; ".join(result.diagnostics.errors)
            )
        annotations = result.diagnostics.id_annotations_by_reason
        order = self._rules.order
        ids = tuple(
            sorted({annotations.get(r, r) for r in result.diagnostics.reasons}, key=lambda i: order.get(i, len(order)))
        )
        if ids:
            reason = " ".join(self._rules.reason(i) for i in ids)
        else:
            reason = f"no policy permits {principal_label} to {action} {resource_label}"
        return Decision(
            allowed=result.allowed,
            action=action,
            principal=principal_label,
            resource=resource_label,
            policy_ids=ids,
            reason=reason,
            from_scope=from_scope.id if from_scope else None,
            errors=tuple(result.diagnostics.errors),
            policies=tuple(self._rules.infos[i] for i in ids if i in self._rules.infos),
        )


def _scope_ref(scope: ScopeLike) -> ScopeRef:
    if isinstance(scope, ScopeRef):
        return scope
    configured = getattr(scope, "configured", scope.type not in GROUP_TYPES)
    suspended = getattr(scope, "suspended", False)
    return ScopeRef(scope.id, scope.type, scope.owner_id, bool(configured), bool(suspended))


def _principal_label(key: _Key) -> str:
    kind, ident = key
    return ident if kind == "Member" else f"{kind.lower()}:{ident}"


def _resource_label(key: _Key) -> str:
    kind, ident = key
    return f"{kind.lower()}:{ident}"


def _display(path: Path) -> str:
    return f"policy/{path.name}" if path.parent == POLICY_DIR else str(path)
