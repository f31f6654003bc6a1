"""Telling a member something privately (a safety alert to a parent), through `Delivery`.

The notifier decides the text per recipient scope and hands each copy to halo's one outbox
(halo/outbound/delivery.py), which makes it durable before any attempt and retries it:

- the member's web inbox (`web:<id>`) gets `inbox_text` — the fuller text, which may quote a
  child only when the caller established that the policy lets this parent read that child's
  transcript;
- every other DM of the member (Telegram, …) gets `text`, which never quotes a child: a chat
  app shows it on a lock screen and keeps it on a phone.

A DM on a platform whose adapter is not running waits in the outbox until it starts. The
copies of one notification share its id (`batch` in the outbox), so the family API can say
which platforms delivered it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from config.family import Family, Member
from halo.core.scopes import member_scopes
from halo.outbound.delivery import Delivery, platform_of
from transcripts import AuditLog


@dataclass(frozen=True, slots=True)
class Notification:
    id: str
    ts: datetime
    member_id: str
    kind: str  # "safety_alert", …
    text: str  # what chat apps get: never a child's words
    about: str | None = None  # the member it concerns, if any
    inbox_text: str | None = None  # the fuller text for the web inbox, if any
    delivered_via: list[str] = field(default_factory=list)  # platforms that took it (not the web inbox)

    @property
    def inbox(self) -> str:
        return self.inbox_text or self.text


class Notifier:
    """Chooses each recipient scope's text and queues it in the outbox; never delays the caller
    for a platform that is down."""

    def __init__(self, family: Callable[[], Family], delivery: Delivery, audit: AuditLog) -> None:
        self._family = family
        self.delivery = delivery
        self.audit = audit

    async def notify_parents(self, text: str, *, kind: str, about: str | None = None) -> list[Notification]:
        return [await self.notify(parent, text, kind=kind, about=about) for parent in self._family().parents]

    async def notify(
        self, member: Member, text: str, *, kind: str, about: str | None = None, inbox_text: str | None = None
    ) -> Notification:
        """Durable when this returns (a row per DM scope in the outbox; the web inbox's copy
        has been handed over). Chat apps get `text`; the web inbox gets `inbox_text` when given."""
        note = Notification(uuid.uuid4().hex, datetime.now(UTC), member.id, kind, text, about, inbox_text)
        dms = sorted(
            (s for s in member_scopes(self._family()) if s.type == "dm" and s.owner_id == member.id),
            key=lambda s: s.platform != "web",  # the web inbox first: it is always there
        )
        for scope in dms:
            body = note.inbox if scope.platform == "web" else note.text
            await self.delivery.send(scope.id, body, kind="alert", about=about, batch=note.id)
        self.audit.write("notification", notification_id=note.id, member=member.id, note_kind=kind, about=about)
        return note

    async def for_member(self, member_id: str, limit: int = 50) -> list[Notification]:
        """The member's latest notifications as their web inbox has them, oldest first."""
        found = []
        for row in await self.delivery.store.rows(scope_id=f"web:{member_id}", kind="alert", limit=limit):
            batch = row.batch or row.message.id
            copies = await self.delivery.store.rows(batch=batch) if row.batch else []
            via = sorted({platform_of(c.message.scope_id) for c in copies if c.state == "sent"} - {"web"})
            text = next((c.message.text for c in copies if platform_of(c.message.scope_id) != "web"), None)
            found.append(
                Notification(
                    batch,
                    row.message.created_at or datetime.now(UTC),
                    member_id,
                    "safety_alert",  # the only alerts halo sends today
                    text or row.message.text,
                    row.about,
                    row.message.text,
                    via,
                )
            )
        return found

    async def drain(self) -> None:
        """Wait for deliveries in flight (shutdown, tests)."""
        await self.delivery.drain()
