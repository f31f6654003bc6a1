"""Telling a member something privately: the seam between the core and whichever adapters run.

The core calls `Notifier.notify_parents(...)`. Every adapter registered with `Delivery`
(halo/family/delivery.py: Telegram …) reaches members through it, in their DM on that platform;
anything else that can reach a member registers as a `NotificationSink`. A notification is
durable before any delivery is tried: it goes into the outbox and, as a role "event" line,
into the member's web DM transcript (`web:<id>`, the inbox the web chat and the family API
read), so a parent hears about it even when no adapter is running. Deliveries that have not
happened yet are retried when a sink registers and whenever another notification is sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from config.family import Family, Member
from halo.family.delivery import Delivery
from halo.pipeline.scopes import member_scopes
from halo.port import Adapter, Outbound
from transcripts import AuditLog, TranscriptLine, TranscriptStore
from transcripts.jsonl import append_line

log = logging.getLogger(__name__)

RETRY_WINDOW = timedelta(days=7)  # an alert older than this is not pushed to a newly started adapter


class NotificationSink(Protocol):
    """A running adapter that can reach a member privately.

    `dm_scope` names the member's private scope on this platform (`telegram:<user id>`), or
    None when the member is not reachable here. `send` delivers text into that scope and
    raises when it could not; the notifier keeps the notification and tries again later.
    """

    name: str

    def dm_scope(self, member: Member) -> str | None: ...

    async def send(self, scope_id: str, text: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Notification:
    id: str
    ts: datetime
    member_id: str
    kind: str  # "safety_alert", …
    text: str  # what adapters deliver
    about: str | None = None  # the member it concerns, if any
    inbox_text: str | None = None  # a fuller text kept inside halo (the web inbox), if any

    @property
    def inbox(self) -> str:
        return self.inbox_text or self.text


class Outbox:
    """`notifications.jsonl`: a "queued" record per notification and a "delivered" record per
    (notification, sink). Append-only, fsync'd, read once at start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._notes: dict[str, Notification] = {}
        self._delivered: dict[str, set[str]] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(raw)
                if record["status"] == "queued":
                    note = Notification(
                        **{k: record[k] for k in ("id", "member_id", "kind", "text", "about")},
                        ts=datetime.fromisoformat(record["ts"]),
                        inbox_text=record.get("inbox_text"),
                    )
                    self._notes[note.id] = note
                elif record["status"] == "delivered":
                    self._delivered.setdefault(record["id"], set()).add(record["via"])
            except (ValueError, KeyError, TypeError):
                log.warning("%s: skipping an unreadable line", self.path)

    def _append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_line(self.path, data)

    def add(self, note: Notification) -> None:
        self._append({**asdict(note), "ts": note.ts.isoformat(), "status": "queued"})
        self._notes[note.id] = note

    def mark_delivered(self, note: Notification, via: str, scope_id: str) -> None:
        self._append(
            {
                "id": note.id,
                "status": "delivered",
                "via": via,
                "scope_id": scope_id,
                "ts": datetime.now(UTC).isoformat(),
            }
        )
        self._delivered.setdefault(note.id, set()).add(via)

    def delivered_via(self, note_id: str) -> set[str]:
        return set(self._delivered.get(note_id, ()))

    def undelivered(self, via: str, since: datetime) -> list[Notification]:
        return [n for n in self._notes.values() if n.ts >= since and via not in self._delivered.get(n.id, ())]

    def undelivered_count(self) -> int:
        """Notifications no sink has delivered (they are in the member's web inbox all the same)."""
        return sum(1 for note_id in self._notes if not self._delivered.get(note_id))

    def for_member(self, member_id: str, limit: int = 50) -> list[Notification]:
        """The member's latest notifications, oldest first."""
        mine = [n for n in self._notes.values() if n.member_id == member_id]
        return mine[-limit:] if limit > 0 else []


class PlatformSink:
    """A NotificationSink over an adapter's outbound side (a registered `halo.port.Adapter`): the member's
    DM on that platform, as halo.yaml names it."""

    def __init__(self, platform: str, sender: Adapter, family: Callable[[], Family]) -> None:
        self.name = platform
        self.sender = sender
        self._family = family

    def dm_scope(self, member: Member) -> str | None:
        return next(
            (
                s.id
                for s in member_scopes(self._family())
                if s.type == "dm" and s.owner_id == member.id and s.platform == self.name
            ),
            None,
        )

    async def send(self, scope_id: str, text: str) -> None:
        await self.sender.send(Outbound(uuid.uuid4().hex, scope_id, text, kind="alert"))


class Notifier:
    """Persists, records and delivers private notifications; delivery never delays the caller."""

    def __init__(
        self,
        family: Callable[[], Family],
        transcripts: TranscriptStore,
        outbox: Outbox,
        audit: AuditLog,
        delivery: Delivery | None = None,
    ) -> None:
        self._family = family
        self.transcripts = transcripts
        self.outbox = outbox
        self.audit = audit
        self.delivery = delivery
        self.sinks: list[NotificationSink] = []
        self._in_flight: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def register(self, sink: NotificationSink) -> None:
        """An adapter that can reach members privately; what is still undelivered goes out now
        (or, registered before the event loop runs, on `retry_soon` at start-up)."""
        self.sinks.append(sink)
        self.retry_soon()

    def retry_soon(self) -> None:
        """Retry undelivered notifications in the background."""
        self._spawn(self.retry())

    def unregister(self, sink: NotificationSink) -> None:
        if sink in self.sinks:
            self.sinks.remove(sink)

    async def notify_parents(self, text: str, *, kind: str, about: str | None = None) -> list[Notification]:
        return [await self.notify(parent, text, kind=kind, about=about) for parent in self._family().parents]

    async def notify(
        self, member: Member, text: str, *, kind: str, about: str | None = None, inbox_text: str | None = None
    ) -> Notification:
        """Durable when this returns (outbox + the member's web inbox); delivery follows.
        Adapters deliver `text`; the web inbox keeps `inbox_text` when given."""
        note = Notification(uuid.uuid4().hex, datetime.now(UTC), member.id, kind, text, about, inbox_text)
        self.outbox.add(note)
        await self._record(note, f"web:{member.id}", "web", note.inbox)
        self.audit.write("notification", notification_id=note.id, member=member.id, note_kind=kind, about=about)
        self.retry_soon()
        return note

    async def retry(self) -> None:
        """Try every (notification, sink) pair not yet delivered."""
        since = datetime.now(UTC) - RETRY_WINDOW
        family = self._family()
        for sink in self._all_sinks():
            for note in self.outbox.undelivered(sink.name, since):
                member = family.member(note.member_id)
                scope_id = sink.dm_scope(member) if member else None
                if scope_id is None or (note.id, sink.name) in self._in_flight:
                    continue
                self._in_flight.add((note.id, sink.name))
                try:
                    await self._deliver(sink, note, scope_id)
                finally:
                    self._in_flight.discard((note.id, sink.name))

    def _all_sinks(self) -> list[NotificationSink]:
        """Registered sinks, then one per Delivery platform no registered sink already covers."""
        found = list(self.sinks)
        names = {sink.name for sink in found}
        if self.delivery is not None:
            found += [
                PlatformSink(platform, sender, self._family)
                for platform, sender in self.delivery.senders().items()
                if platform not in names
            ]
        return found

    async def _deliver(self, sink: NotificationSink, note: Notification, scope_id: str) -> None:
        try:
            await sink.send(scope_id, note.text)
        except Exception as exc:  # kept in the outbox; the next retry tries again
            log.warning("notification %s via %s failed: %s", note.id, sink.name, exc)
            self.audit.write(
                "notification_failed",
                notification_id=note.id,
                member=note.member_id,
                via=sink.name,
                error=f"{type(exc).__name__}: {exc}"[:300],
            )
            return
        self.outbox.mark_delivered(note, sink.name, scope_id)
        await self._record(note, scope_id, scope_id.split(":", 1)[0], note.text)
        self.audit.write(
            "notification_delivered", notification_id=note.id, member=note.member_id, via=sink.name, scope_id=scope_id
        )

    async def _record(self, note: Notification, scope_id: str, platform: str, text: str) -> None:
        await self.transcripts.append(
            TranscriptLine(
                id=uuid.uuid4().hex,
                ts=datetime.now(UTC),
                scope_id=scope_id,
                role="event",
                text=text,
                speaker="halo",
                target=note.about,
                platform=platform,
                extra={"notification_id": note.id, "kind": note.kind},
            )
        )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:  # no loop yet (registering at build time): start-up calls retry_soon
            coro.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for deliveries in flight (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
