"""The parts later issues plug into `halo.services`, as the admin API expects them.

Each seam is looked up with getattr, so the admin API works before the part exists and
picks it up, unchanged, once the composition root sets it:

- `services.semantic` (semantic index, issue 5): `health()` → runs, failures, last success,
  last error, per-scope lag, for /status.

Any of them may also implement `forget_scope(scope_id)`, called when a scope is purged.
Methods may be sync or async.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from halo.services import Services
from transcripts.audit import drop_secrets


@runtime_checkable
class SemanticSeam(Protocol):
    def health(self) -> Mapping[str, Any]: ...


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
