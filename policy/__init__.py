"""Policy-as-code: Cedar decides what is allowed before the model sees anything and inside every tool."""

from policy.engine import (
    ACTIONS,
    SYSTEM,
    Action,
    AuditSink,
    Decision,
    PolicyEngine,
    PolicyError,
    PolicyInfo,
    ScopeLike,
    ScopeRef,
    SystemPrincipal,
    explain,
    scope_ref,
)

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
