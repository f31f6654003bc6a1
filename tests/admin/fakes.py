"""Stand-ins for the parts later issues plug into `services`, shaped as admin_api.seams expects."""

from __future__ import annotations

from typing import Any


class WithSeams:
    """The real Services plus extra attributes (Services has slots, so it cannot grow them itself)."""

    def __init__(self, inner: Any, **seams: Any) -> None:
        self._inner = inner
        self.__dict__.update(seams)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FakeSemantic:
    async def close(self) -> None:
        return None

    def health(self) -> dict[str, Any]:
        return {"enabled": True, "runs": 12, "failures": 1, "last_success": "2026-01-02T03:00:00+00:00",
                "last_error": None, "lag": {"web:mom": 0}}
