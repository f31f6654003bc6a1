"""Stand-ins for the parts later issues plug into `services`, shaped as admin_api.seams expects."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


class WithSeams:
    """The real Services plus extra attributes (Services has slots, so it cannot grow them itself)."""

    def __init__(self, inner: Any, **seams: Any) -> None:
        self._inner = inner
        self.__dict__.update(seams)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FakeMemory:
    def __init__(self) -> None:
        self.distilled: list[str] = []
        self.forgotten: list[str] = []

    async def distill(self, scope_id: str) -> dict[str, Any]:
        self.distilled.append(scope_id)
        return {"facts_added": 2, "watermark": 1234, "ran_at": datetime(2026, 1, 2, 3, 4, tzinfo=UTC)}

    def status(self) -> dict[str, Any]:
        return {"enabled": True, "every_n_items": 20, "scopes": {
            "web:mom": {"distill": {"last_run": "2026-01-02T03:04:00+00:00", "last_error": None, "next_retry": None}}
        }}

    def forget_scope(self, scope_id: str) -> None:
        self.forgotten.append(scope_id)

    async def close(self) -> None:
        return None


class FakeSemantic:
    def health(self) -> dict[str, Any]:
        return {"enabled": True, "runs": 12, "failures": 1, "last_success": "2026-01-02T03:00:00+00:00",
                "last_error": None, "lag": {"web:mom": 0}}
