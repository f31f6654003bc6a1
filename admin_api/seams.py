"""The parts later issues plug into `halo.services`, as the admin API expects them.

Each seam is looked up with getattr, so the admin API works before the part exists and
picks it up, unchanged, once the composition root sets it:

- `services.memory` (markdown memory, issue 4): `distill(scope_id)` runs distillation of
  one scope now; optionally `distillation_state()` → per-scope state for /status.
- `services.pairing` (Telegram pairing, issue 3): `pending()`, `approve(code, *, role, name,
  age_group, approved_by)`, `deny(code, *, denied_by)`. An unknown or expired code raises
  LookupError (→ 404), a bad role or name ValueError (→ 400).
- `services.semantic` (semantic index, issue 5): `health()` → runs, failures, last success,
  last error, per-scope lag, for /status.

Any of them may also implement `forget_scope(scope_id)`, called when a scope is purged.
Methods may be sync or async.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Iterable, Mapping
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from halo.services import Services
from transcripts.audit import drop_secrets


@runtime_checkable
class MemorySeam(Protocol):
    def distill(self, scope_id: str) -> Awaitable[Any] | Any: ...


@runtime_checkable
class PairingSeam(Protocol):
    def pending(self) -> Awaitable[Iterable[Any]] | Iterable[Any]: ...

    def approve(
        self, code: str, *, role: str, name: str, age_group: str | None, approved_by: str
    ) -> Awaitable[Any] | Any: ...

    def deny(self, code: str, *, denied_by: str) -> Awaitable[Any] | Any: ...


@runtime_checkable
class SemanticSeam(Protocol):
    def health(self) -> Mapping[str, Any]: ...


def memory(services: Services) -> MemorySeam | None:
    found = getattr(services, "memory", None)
    return found if isinstance(found, MemorySeam) else None


def pairing(services: Services) -> PairingSeam | None:
    found = getattr(services, "pairing", None)
    return found if isinstance(found, PairingSeam) else None


def semantic(services: Services) -> SemanticSeam | None:
    found = getattr(services, "semantic", None)
    return found if isinstance(found, SemanticSeam) else None


def jsonable(value: Any) -> Any:
    """Whatever a seam returns (dataclasses, pydantic models, mappings, datetimes) as JSON
    values, with secret-looking keys dropped."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in drop_secrets(dict(value)).items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


# A pairing request as the API documents it, whatever the pairing store calls its fields.
_PAIRING_FIELDS: dict[str, tuple[str, ...]] = {
    "code": ("code",),
    "platform": ("platform",),
    "userId": ("user_id", "platform_user_id", "telegram_user_id"),
    "displayName": ("display_name", "name", "full_name"),
    "username": ("username",),
    "requestedAt": ("requested_at", "created_at", "ts"),
    "expiresAt": ("expires_at",),
}


def pairing_request(item: Any) -> dict[str, Any] | None:
    """One pending request in the documented shape; None when it has no code."""
    shaped: dict[str, Any] = {}
    for key, candidates in _PAIRING_FIELDS.items():
        value = next((v for c in candidates if (v := _field(item, c)) is not None), None)
        value = jsonable(value)
        shaped[key] = None if value is None else str(value)
    return shaped if shaped["code"] else None


def _field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)
