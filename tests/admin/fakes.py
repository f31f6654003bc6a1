"""Stand-ins for the parts later issues plug into `services`, shaped as admin_api.seams expects."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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


@dataclass
class PendingRequest:
    code: str
    platform: str = "telegram"
    user_id: int = 5550001
    display_name: str = "Cousin Meera"
    username: str = "meera"
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(minutes=3))
    expires_at: datetime = field(default_factory=lambda: datetime.now(UTC) + timedelta(minutes=57))


class FakePairing:
    """Pending requests in memory; approve and deny as the Telegram pairing store would answer."""

    def __init__(self, *codes: str) -> None:
        self.requests = {code: PendingRequest(code) for code in codes}
        self.approved: list[dict[str, Any]] = []
        self.denied: list[dict[str, Any]] = []

    def pending(self) -> list[PendingRequest]:
        return list(self.requests.values())

    async def approve(self, code: str, *, role: str, name: str, age_group: str | None, approved_by: str) -> Any:
        if code not in self.requests:
            raise LookupError(f"no pending request with code {code}")
        del self.requests[code]
        member = {"id": name.lower().replace(" ", "-"), "name": name, "role": role, "age_group": age_group,
                  "telegram_user_id": 5550001}
        self.approved.append({"code": code, "approved_by": approved_by, **member})
        return member

    async def deny(self, code: str, *, denied_by: str) -> None:
        if code not in self.requests:
            raise LookupError(f"no pending request with code {code}")
        del self.requests[code]
        self.denied.append({"code": code, "denied_by": denied_by})


class FakeSemantic:
    def health(self) -> dict[str, Any]:
        return {"enabled": True, "runs": 12, "failures": 1, "last_success": "2026-01-02T03:00:00+00:00",
                "last_error": None, "lag": {"web:mom": 0}}
