"""Everything halo sends — replies, notices, home events, digests, safety alerts — leaves
through here: written to the outbox table in halo.db first, then handed to the adapter that
owns the scope (`halo.port.Adapter.send`).

Per scope, messages go out in the order they were queued: a later one waits while an
earlier one is retried. Different scopes go in parallel. `SendFailed` is retried with
exponential backoff and jitter (honouring the platform's `retry_after`, capped); a
permanent failure is recorded and the next message goes. A message for a platform with no
running adapter stays pending until one registers; pending rows are resumed at start-up.

On PostgreSQL several processes may share the outbox: each attempt holds its row's lock
(`FOR UPDATE SKIP LOCKED`, `OutboxStore.claim_oldest`) until its mark is written, so a row is
sent by one process once; a process sends only for the platforms it runs (`register`; a chat
app's adapter runs on the leader), and looks for rows other processes queued every
`poll_every` seconds.

A reply someone waits for on a live request (`halo.port.LiveReplies`: the web chat, the
terminal) is handed over first and written once, as sent, when nothing older waits in its
scope: its text is in the transcript already, so the row is the record, not the safeguard:
such rows are written in batches, a second at most after the reply went.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from config.family import Family
from halo.core.scopes import member_scopes
from halo.db_conn import Conn
from halo.outbound.outbox import Marks, OutboxStore, Row
from halo.port import Adapter, Audit, Choice, LiveReplies, Outbound, OutboundKind, Scope, SendFailed
from halo.storage import HaloDB
from transcripts import TranscriptStore
from transcripts.lines import Alert, Notice
from transcripts.write_behind import WriteBehind

log = logging.getLogger(__name__)

BASE_DELAY = 1.0  # seconds before the first retry; doubled each time
MAX_DELAY = 300.0  # no retry waits longer, whatever the platform asks
RECORD_SENT_EVERY = 1.0  # seconds: rows of live replies handed over are written in batches
POLL_EVERY = 1.0  # seconds, PostgreSQL: rows other processes queued are looked for this often


def _now() -> datetime:
    return datetime.now(UTC)


def platform_of(scope_id: str) -> str:
    return scope_id.partition(":")[0]


class Delivery:
    """`send(scope_id, text)`, `to_member(member_id, text)`, `to_parents(text)`: the one way
    halo says anything. `family` is a callable: the live family."""

    def __init__(
        self,
        db: HaloDB,
        transcripts: TranscriptStore,
        family: Callable[[], Family],
        *,
        audit: Audit | None = None,
        base_delay: float = BASE_DELAY,
        max_delay: float = MAX_DELAY,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.store = OutboxStore(db)
        self.transcripts = transcripts
        self.audit = audit
        self._family = family
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.clock = clock
        self.counts = {"pending": 0, "sent": 0, "failed": 0}  # kept as rows change (read once, at first use)
        self._counted = False
        self._clear: set[str] = set()  # scopes with nothing pending, as far as this run has seen
        self._adapters: dict[str, Adapter] = {}  # the platforms this process sends for
        self._known: set[str] = set()  # platforms halo runs, here or on another process
        self._claims = db.backend == "postgresql"  # rows are claimed: other processes share the outbox
        self.poll_every = POLL_EVERY if self._claims else None
        # scopes whose oldest row another process is sending: looked at again after poll_every
        self._elsewhere: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._flushing: dict[str, asyncio.Task[None]] = {}
        # rows of live replies handed over: the record, written in batches (the text is in the transcript)
        self._sent_rows = WriteBehind(self.store.record_sent, RECORD_SENT_EVERY, "rows of replies handed over")
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None

    # --- adapters --------------------------------------------------------------------

    def register(self, platform: str, adapter: Adapter) -> None:
        """The adapter that sends to `<platform>:…` scopes; what waited for it goes now."""
        self._adapters[platform] = adapter
        self._known.add(platform)
        self._wake.set()

    def know(self, platform: str) -> None:
        """A platform halo runs on another process (the leader's chat apps): its scopes are
        reachable, and its rows are sent there."""
        self._known.add(platform)

    def unregister(self, platform: str) -> None:
        self._adapters.pop(platform, None)

    def can_send(self, scope_id: str) -> bool:
        return platform_of(scope_id) in self._known

    def awaits_reply(self, scope_id: str, envelope_id: str) -> bool:
        """A person waits on a request here for the reply to this message (`LiveReplies`)."""
        adapter = self._adapters.get(platform_of(scope_id))
        return isinstance(adapter, LiveReplies) and adapter.awaits_reply(envelope_id)

    def reaches(self, scope: Scope) -> bool:
        """Whether a member's DM is one halo pushes notices to: a chat app that runs. The web
        inbox gets only what is sent to it by name (a safety alert's fuller text)."""
        return scope.platform != "web" and self.can_send(scope.id)

    # --- sending ---------------------------------------------------------------------

    async def send(
        self,
        scope_id: str,
        text: str,
        *,
        kind: OutboundKind = "notice",
        reply_to: str | None = None,
        in_reply_to_envelope: str | None = None,
        about: str | None = None,
        batch: str | None = None,
        message_id: str | None = None,
        choices: tuple[Choice, ...] = (),
    ) -> str:
        """Queue one message; returns its id once the row is committed and the first attempt
        was made (when the scope has nothing older waiting and its adapter is registered).
        `message_id` lets a caller record what it sends before anyone can see it; `choices`
        are buttons under it (halo/outbound/asks.py records what each decides)."""
        await self._count_once()
        lock = self._locks.setdefault(scope_id, asyncio.Lock())
        adapter = self._adapters.get(platform_of(scope_id))
        if (
            kind == "reply"
            and in_reply_to_envelope is not None
            and isinstance(adapter, LiveReplies)
            and adapter.awaits_reply(in_reply_to_envelope)
            and scope_id in self._clear
            and not lock.locked()
        ):
            message = Outbound(
                message_id or uuid.uuid4().hex, scope_id, text, kind=kind, reply_to=reply_to,
                in_reply_to_envelope=in_reply_to_envelope, created_at=self.clock(), choices=choices,
            )  # fmt: skip
            if await self._hand_over(adapter, lock, message, about=about, batch=batch):
                return message.id
        row = await self.store.add(
            scope_id,
            text,
            kind=kind,
            reply_to=reply_to,
            in_reply_to_envelope=in_reply_to_envelope,
            about=about,
            batch=batch,
            now=self.clock(),
            message_id=message_id,
            choices=choices,
        )
        self.counts["pending"] += 1
        self._ensure_worker()
        if scope_id in self._clear and adapter is not None and not lock.locked() and not self._claims:
            # nothing older waits in this scope: try the row in hand, without reading it back
            async with lock:
                self._clear.discard(scope_id)
                if await self._attempt(adapter, row):
                    self._clear.add(scope_id)
            return row.message.id
        await self._flush(scope_id)
        return row.message.id

    async def _hand_over(
        self, adapter: Adapter, lock: asyncio.Lock, message: Outbound, *, about: str | None, batch: str | None
    ) -> bool:
        """A live reply: handed over, then recorded as sent. False when the adapter failed it
        (nothing is written then: the caller queues it like any message)."""
        async with lock:
            try:
                await adapter.send(message)
            except Exception as exc:  # SendFailed or a bug: the outbox takes it from here
                log.warning("handing a reply to %s failed, queued instead: %s", message.scope_id, exc)
                return False
        self.counts["sent"] += 1
        self._sent_rows.add((message, about, batch))
        return True

    async def _count_once(self) -> None:
        if not self._counted:
            self._counted = True
            self.counts = await self.store.counts()

    def member_dms(self, member_id: str) -> list[str]:
        """The chat-app DMs of one member that halo runs: where `to_member` sends."""
        return [
            scope.id
            for scope in member_scopes(self._family())
            if scope.type == "dm" and scope.owner_id == member_id and self.reaches(scope)
        ]

    async def to_member(self, member_id: str, text: str, kind: OutboundKind = "notice") -> list[str]:
        """Send to every chat-app DM of one member that halo runs; returns the scope ids."""
        reached = self.member_dms(member_id)
        for scope_id in reached:
            await self.send(scope_id, text, kind=kind)
        return reached

    async def to_parents(self, text: str, kind: OutboundKind = "notice") -> list[str]:
        """Tell every parent in their own DMs. Returns the scope ids reached (may be none:
        the caller's audit event is then the only record)."""
        reached = []
        for parent in self._family().parents:
            reached += await self.to_member(parent.id, text, kind)
        if not reached:
            log.warning("no parent DM is reachable for a notice: %s", text[:80])
        return reached

    async def add_in(
        self,
        conn: Conn,
        scope_id: str,
        text: str,
        *,
        kind: OutboundKind = "notice",
        about: str | None = None,
        choices: tuple[Choice, ...] = (),
    ) -> Row:
        """Queue a message inside the caller's halo.db transaction (opened with
        `halo.outbound.outbox.metadata` among its tables), so it is queued if and only if the
        caller's own change commits. Hand the rows to `committed` after the commit."""
        return await self.store.add_in(conn, scope_id, text, kind=kind, about=about, now=self.clock(), choices=choices)

    async def committed(self, rows: list[Row]) -> None:
        """Rows `add_in` queued are committed: deliver them like any other."""
        if not rows:
            return
        if self._counted:
            self.counts["pending"] += len(rows)
        else:
            await self._count_once()  # reads them with the rest
        for row in rows:
            self._clear.discard(row.message.scope_id)  # something older than the next send waits now
        self._ensure_worker()
        self._wake.set()

    async def retry_now(self, platform: str) -> None:
        """The platform is back: its waiting messages are due now (their order is kept)."""
        if await self.store.due_now(f"{platform}:", self.clock()):
            self._wake.set()

    # --- delivering ------------------------------------------------------------------

    async def _flush(self, scope_id: str) -> None:
        """Deliver the scope's due messages oldest first; stop at one that has to wait."""
        await self._count_once()
        lock = self._locks.setdefault(scope_id, asyncio.Lock())
        async with lock:
            self._clear.discard(scope_id)
            if self._claims:
                await self._flush_claimed(scope_id)
                return
            while (row := await self.store.oldest_pending(scope_id)) is not None:
                adapter = self._adapters.get(platform_of(scope_id))
                if adapter is None or row.next_attempt_at > self.clock():
                    return
                if not await self._attempt(adapter, row):
                    return
            self._clear.add(scope_id)

    async def _flush_claimed(self, scope_id: str) -> None:
        """`_flush` on a shared outbox: each row attempted under its claim (the caller holds
        the scope's lock)."""
        while (adapter := self._adapters.get(platform_of(scope_id))) is not None:
            async with self.store.claim_oldest(scope_id) as claimed:
                if claimed.row is None:
                    if claimed.busy:
                        self._elsewhere[scope_id] = time.monotonic() + (self.poll_every or 0.0)
                    else:
                        self._clear.add(scope_id)
                    return
                if claimed.row.next_attempt_at > self.clock():
                    return
                if not await self._attempt(adapter, claimed.row, claimed):
                    return

    async def _attempt(self, adapter: Adapter, row: Row, marks: Marks | None = None) -> bool:
        """One try. False when the message has to wait for a retry. `marks`: where its outcome
        is written (a claimed row's own transaction; else the store)."""
        marks = marks or self.store
        message = row.message
        try:
            await adapter.send(message)
        except SendFailed as exc:
            if exc.permanent:
                await self._give_up(row, exc.reason, marks)
                return True
            await self._retry_later(row, exc.reason, exc.retry_after, marks)
            return False
        except Exception as exc:  # an adapter bug or an unexpected error: retried like a network error
            log.exception("sending %s to %s failed", message.id, message.scope_id)
            await self._retry_later(row, f"{type(exc).__name__}: {exc}", None, marks)
            return False
        await marks.sent(message.id)
        self._counted_move("sent")
        await self._record(row)
        if message.kind == "alert" and self.audit is not None:
            self.audit.write("notification_delivered", notification_id=row.batch, scope_id=message.scope_id)
        return True

    def delay(self, attempts: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter, at least what the platform asked, at most max_delay."""
        backoff = self.base_delay * 2 ** min(attempts, 30)
        backoff = backoff / 2 + random.uniform(0, backoff / 2)
        return min(max(backoff, retry_after or 0.0), self.max_delay)

    async def _retry_later(self, row: Row, error: str, retry_after: float | None, marks: Marks) -> None:
        pause = self.delay(row.attempts, retry_after)
        log.warning("sending to %s failed, retrying in %.1fs: %s", row.message.scope_id, pause, error)
        await marks.retry_at(row.message.id, self.clock() + timedelta(seconds=pause), error)
        self._wake.set()

    def _counted_move(self, to: str) -> None:
        self.counts["pending"] = max(self.counts["pending"] - 1, 0)
        self.counts[to] += 1

    async def _give_up(self, row: Row, error: str, marks: Marks) -> None:
        await marks.failed(row.message.id, error)
        self._counted_move("failed")
        log.warning("a message to %s was refused for good, kept as failed: %s", row.message.scope_id, error)
        if self.audit is not None:
            self.audit.write(
                "delivery_failed", scope_id=row.message.scope_id, outbox_id=row.message.id, error=error[:300]
            )

    async def _record(self, row: Row) -> None:
        """What halo said on its own goes into the scope's transcript (a reply is there already)."""
        message = row.message
        if message.kind == "reply":
            return
        # an alert is an event, out of the model's history; the web chat labels each by its kind
        said = Alert if message.kind == "alert" else Notice
        await self.transcripts.append(
            said(
                id=uuid.uuid4().hex,
                ts=self.clock(),
                scope_id=message.scope_id,
                text=message.text,
                speaker="halo",
                target=row.about,
                platform=platform_of(message.scope_id),
                outbox_id=message.id,
                kind=message.kind,
            )
        )

    # --- the background worker -------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name="delivery")

    async def start(self) -> None:
        """Resume what a previous run left pending, and retry from now on."""
        self._ensure_worker()
        self._wake.set()

    async def _work(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock()
            later: list[datetime] = []
            try:
                waiting = await self.store.waiting()
            except Exception as exc:  # the database away for a moment: look again after a pause
                log.warning("the outbox could not be read: %s", exc)
                waiting, later = [], [now + timedelta(seconds=POLL_EVERY)]
            for scope_id, due in waiting:
                if platform_of(scope_id) not in self._adapters or scope_id in self._flushing:
                    continue
                if self._elsewhere.get(scope_id, 0.0) > time.monotonic():
                    continue
                if due <= now:
                    task = asyncio.create_task(self._flush(scope_id), name=f"delivery {scope_id}")
                    self._flushing[scope_id] = task
                    task.add_done_callback(partial(self._done, scope_id))
                else:
                    later.append(due)
            timeout = (min(later) - now).total_seconds() if later else None
            if self.poll_every is not None:  # other processes queue rows too
                timeout = min(timeout, self.poll_every) if timeout is not None else self.poll_every
            with contextlib.suppress(TimeoutError):  # not wait_for: 3.11 loses a cancel (test_background_loops_stop)
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def _done(self, scope_id: str, _: object = None) -> None:
        self._flushing.pop(scope_id, None)
        self._wake.set()

    async def drain(self) -> None:
        """Wait for the attempts in flight now (shutdown, tests). A retry the worker starts after
        this is not waited for — it stays queued like any retry due later; waiting for it would
        never end while an adapter keeps failing (a stopped one, say)."""
        await self._sent_rows.flush()
        in_flight = list(self._flushing.values())
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)

    async def pause(self) -> None:
        """Send nothing more until `start` (this process lost its family): the worker stops and the
        attempts in flight finish; what is pending stays in the outbox for the active process."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker
            self._worker = None
        in_flight = list(self._flushing.values())
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)

    async def close(self) -> None:
        """Stop retrying (what is pending stays in the outbox for the next start), then let the
        attempts in flight finish."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        await self._sent_rows.close()
        await self.drain()

    def status(self) -> dict[str, Any]:
        return dict(self.counts)
