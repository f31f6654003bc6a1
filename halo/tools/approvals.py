"""A consequential tool asks a parent first: the call is kept in halo.db, the parents are asked
in their own DMs, and only a parent's "yes" (within `tools.approval_minutes`) carries it out.

The model is never the one that waits: the tool call files the request and tells the model it
is waiting, so the turn ends at once and the model's history stays whole. The parent's answer
is taken in code (an answerer on the gateway, before any model is asked), the action runs with
the arguments the parent saw, and the person who asked is told the outcome in their chat. A
request nobody answers in time expires, and the asker is told that too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, select, update

from config.family import Family
from halo.core.turn import Turn
from halo.outbound import asks as asks_module
from halo.outbound import outbox
from halo.outbound.asks import PARENTS, Asks, Option
from halo.outbound.delivery import Delivery
from halo.outbound.outbox import Row
from halo.port import Choice
from halo.storage import HaloDB
from transcripts import AuditLog, TranscriptStore
from transcripts.lines import Message, Notice

log = logging.getLogger(__name__)

metadata = MetaData()
approvals_table = Table(
    "approvals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("action", String(64), nullable=False),
    Column("arguments", Text, nullable=False),  # JSON: exactly what the parent was shown
    Column("summary", Text, nullable=False),
    Column("asked_by", String(64), nullable=False),
    Column("scope_id", String(200), nullable=False),  # where the asker is told the outcome
    Column("created", DateTime(timezone=True), nullable=False),
    Column("expires", DateTime(timezone=True), nullable=False),
    Column("state", String(8), nullable=False, default="pending", index=True),  # pending|approved|denied|expired
    Column("decided_by", String(64)),
    Column("outcome", Text),
)

asks_table = Table(  # which chat each question went to: what a bare "yes" there can answer
    "approval_asks",
    metadata,
    Column("outbox_id", String(64), primary_key=True),  # the question as Delivery sent it
    Column("request_id", Integer, nullable=False, index=True),
    Column("parent_id", String(64), nullable=False),
    Column("scope_id", String(200), nullable=False),
    Column("asked_at", DateTime(timezone=True), nullable=False),
)

YES = re.compile(r"^\s*(yes|y|ok|okay|approve|approved|sure|go ahead)\s*[.!]*\s*$", re.I)
NO = re.compile(r"^\s*(no|n|deny|denied|nope|don't|do not)\s*[.!]*\s*$", re.I)
NAMED = re.compile(r"^\s*(yes|approve|no|deny)\s+#?(\d{1,9})\s*[.!]*\s*$", re.I)  # "yes 3": that request
TAIL = 40  # transcript lines read back to see what halo said since the parent last spoke

Action = Callable[["Pending"], Awaitable[str]]  # carries an approved call out; returns what happened


@dataclass(frozen=True, slots=True)
class Pending:
    id: int
    action: str
    arguments: dict[str, Any]
    summary: str
    asked_by: str
    scope_id: str
    expires: datetime


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)  # SQLite drops the zone


def _pending(row: Any) -> Pending:
    m = row._mapping
    return Pending(
        m["id"],
        m["action"],
        json.loads(m["arguments"]),
        m["summary"],
        m["asked_by"],
        m["scope_id"],
        _aware(m["expires"]),
    )


class Approvals:
    """Requests waiting for a parent, and the actions a "yes" carries out."""

    def __init__(
        self,
        db: HaloDB,
        delivery: Delivery,
        transcripts: TranscriptStore,
        family: Callable[[], Family],
        audit: AuditLog,
        *,
        minutes: float,
        asks: Asks | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.asks = asks  # the question carries approve · deny buttons: "yes N" and "no N" typed
        self.db = db
        self.delivery = delivery
        self.transcripts = transcripts
        self.family = family
        self.audit = audit
        self.minutes = minutes
        self.clock = clock
        self.actions: dict[str, Action] = {}
        self._timer: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    # --- asking ----------------------------------------------------------------------

    async def ask(self, turn: Turn, action: str, arguments: dict[str, Any], summary: str) -> str:
        """File the request and ask the parents; returns what the model tells the person."""
        asker = turn.member
        assert asker is not None  # only members are offered tools
        now = self.clock()
        async with self.db.write(metadata) as conn:
            result = await conn.execute(
                approvals_table.insert().values(
                    action=action,
                    arguments=json.dumps(arguments),
                    summary=summary,
                    asked_by=asker.id,
                    scope_id=turn.scope.id,
                    created=now,
                    expires=now + timedelta(minutes=self.minutes),
                    state="pending",
                )
            )
        request_id = int(result.inserted_primary_key[0])  # type: ignore[index]
        question = (
            f"{asker.name} asks me to {summary}\n"
            f"Reply yes or no. (Request {request_id}; later, say “yes {request_id}”. "
            f"It lapses in {self._minutes_text()}.)"
        )
        asked = await self._ask_parents(request_id, asker.id, question)
        self.audit.write("approval_asked", id=request_id, action=action, by=asker.id, parents=asked)
        self._changed.set()
        if not asked:
            await self._settle(request_id, "expired", None, "no parent could be asked")
            return "No parent can be reached to approve this, so it was not done. Tell the person."
        return (
            f"Not done yet: a parent must approve it first, and has been asked in their own chat "
            f"(request {request_id}). Tell the person you'll let them know here."
        )

    async def _ask_parents(self, request_id: int, asker_id: str, question: str) -> list[str]:
        """Ask in each parent's DMs, and keep which message asked what: a bare yes is matched to
        the request by that record, never by reading the question's text back. Each question and
        its record are queued in one transaction: neither is ever there without the other."""
        reached: list[str] = []
        queued: list[Row] = []
        parents = approvers(self.family(), asker_id)
        async with self.db.write(metadata, outbox.metadata, asks_module.metadata) as conn:
            choices: tuple[Choice, ...] = ()
            if self.asks is not None:
                options = [Option("Approve", f"yes {request_id}"), Option("Deny", f"no {request_id}")]
                who = parents[0] if len(parents) == 1 else PARENTS
                ttl = timedelta(minutes=self.minutes)
                choices = await self.asks.record(options, who=who, ttl=ttl, conn=conn)
            for parent_id in parents:
                for scope_id in self.delivery.member_dms(parent_id):
                    row = await self.delivery.add_in(conn, scope_id, question, choices=choices)
                    await conn.execute(
                        asks_table.insert().values(
                            outbox_id=row.message.id,
                            request_id=request_id,
                            parent_id=parent_id,
                            scope_id=scope_id,
                            asked_at=self.clock(),
                        )
                    )
                    queued.append(row)
                    reached.append(scope_id)
        await self.delivery.committed(queued)
        return reached

    def _minutes_text(self) -> str:
        minutes = round(self.minutes)
        return f"{minutes} minute{'' if minutes == 1 else 's'}" if minutes < 120 else f"{minutes // 60} hours"

    # --- answering -------------------------------------------------------------------

    async def answer(self, turn: Turn, _on_model_start: object = None) -> str | None:
        """A parent's yes or no in their own DM, while something waits for them; None otherwise
        (the message is an ordinary one). Registered as a gateway answerer."""
        member = turn.member
        if member is None or member.role != "parent" or turn.scope.type != "dm" or turn.scope.owner_id != member.id:
            return None
        text = turn.envelope.text
        named = NAMED.match(text)
        approve = YES.match(text) is not None or (named is not None and named[1].lower() in ("yes", "approve"))
        deny = NO.match(text) is not None or (named is not None and named[1].lower() in ("no", "deny"))
        if not (approve or deny):
            return None
        waiting = await self.waiting_for(member.id)
        if named is not None:
            request = next((r for r in waiting if r.id == int(named[2])), None)
            if request is None:
                return f"Request {named[2]} is not waiting for you (answered, lapsed, or not yours)."
        else:  # a bare yes answers a question halo asked since the parent last spoke, not an older one
            asked = await self._asked_since_last_spoke(turn, member.id)
            request = next((r for r in reversed(waiting) if r.id in asked), None)
            if request is None:
                return None  # an ordinary yes, to something else halo said
        decision = turn.decide("admin", from_here=False)  # only who administers halo approves
        if not decision.allowed:
            return f"Only a parent can approve that: {decision.reason}"
        if deny:
            await self._settle(request.id, "denied", member.id, "not approved")
            await self.delivery.send(request.scope_id, f"{member.name} said no, so I did not {request.summary}")
            return f"Understood: I did not {request.summary}"
        outcome = await self._carry_out(request)
        await self._settle(request.id, "approved", member.id, outcome)
        await self.delivery.send(request.scope_id, f"{member.name} said yes. {outcome}")
        return f"Done: {outcome}"

    async def _asked_since_last_spoke(self, turn: Turn, parent_id: str) -> set[int]:
        """The requests whose question reached this chat after the parent's previous message: the
        outbox ids of what halo said since then, looked up in the record of the asks. Nothing in
        the text counts, so a member's words quoted in a question cannot name another request."""
        tail = await asyncio.to_thread(self.transcripts.tail, turn.scope.id, TAIL)
        shown: set[str] = set()
        for line in reversed(tail):
            if isinstance(line, Message) and line.id != turn.envelope.id:
                break
            if isinstance(line, Notice):
                shown.add(line.outbox_id)
        if not shown:
            return set()
        async with self.db.read(metadata) as conn:
            rows = await conn.execute(
                select(asks_table.c.request_id).where(
                    asks_table.c.outbox_id.in_(shown),
                    asks_table.c.scope_id == turn.scope.id,
                    asks_table.c.parent_id == parent_id,
                )
            )
            return {int(row[0]) for row in rows}

    async def waiting_for(self, parent_id: str) -> list[Pending]:
        """Requests this parent was asked and nobody has answered, oldest first."""
        family = self.family()
        async with self.db.read(metadata) as conn:
            rows = (
                await conn.execute(
                    select(approvals_table).where(approvals_table.c.state == "pending").order_by(approvals_table.c.id)
                )
            ).all()
        now = self.clock()
        pending = [_pending(r) for r in rows]
        return [p for p in pending if p.expires > now and parent_id in approvers(family, p.asked_by)]

    async def _carry_out(self, request: Pending) -> str:
        action = self.actions.get(request.action)
        if action is None:
            return f"I could not {request.summary}: that action is not available any more."
        try:
            return await action(request)
        except Exception as exc:
            log.exception("approved action %s failed", request.action)
            return f"I could not {request.summary}: {type(exc).__name__}."

    async def _settle(self, request_id: int, state: str, by: str | None, outcome: str) -> bool:
        """Move a pending request to its end state; False when someone settled it first."""
        async with self.db.write(metadata) as conn:
            result = await conn.execute(
                update(approvals_table)
                .where(approvals_table.c.id == request_id, approvals_table.c.state == "pending")
                .values(state=state, decided_by=by, outcome=outcome)
            )
        settled = bool(result.rowcount)
        if settled:
            self.audit.write("approval_" + state, id=request_id, by=by)
        return settled

    # --- lapsing ---------------------------------------------------------------------

    async def expire_due(self) -> int:
        """Requests past their time lapse, and their askers are told. Returns how many."""
        now = self.clock()
        async with self.db.read(metadata) as conn:
            rows = (
                await conn.execute(
                    select(approvals_table).where(
                        approvals_table.c.state == "pending", approvals_table.c.expires <= now
                    )
                )
            ).all()
        lapsed = 0
        for request in map(_pending, rows):
            if await self._settle(request.id, "expired", None, "no parent answered in time"):
                lapsed += 1
                await self.delivery.send(
                    request.scope_id, f"No parent answered in time, so I did not {request.summary}"
                )
        return lapsed

    async def next_expiry(self) -> datetime | None:
        async with self.db.read(metadata) as conn:
            rows = (
                await conn.execute(
                    select(approvals_table.c.expires)
                    .where(approvals_table.c.state == "pending")
                    .order_by(approvals_table.c.expires)
                    .limit(1)
                )
            ).all()
        return _aware(rows[0][0]) if rows else None

    def start(self) -> None:
        """Lapse requests on time, including those a previous run left waiting."""
        if self._timer is None:
            self._timer = asyncio.create_task(self._lapse_on_time())

    async def _lapse_on_time(self) -> None:
        while True:
            try:
                await self.expire_due()
                due = await self.next_expiry()
            except Exception:
                log.exception("lapsing approval requests failed")
                due = None
            wait = 60.0 if due is None else max(0.05, (due - self.clock()).total_seconds())
            self._changed.clear()
            with contextlib.suppress(TimeoutError):  # not wait_for: 3.11 loses a cancel (test_background_loops_stop)
                async with asyncio.timeout(min(wait, 60.0)):
                    await self._changed.wait()

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            await asyncio.gather(self._timer, return_exceptions=True)
            self._timer = None


def approvers(family: Family, asker_id: str) -> list[str]:
    """Who answers a request: a parent confirms their own; anyone else's goes to every parent."""
    asker = family.member(asker_id)
    if asker is not None and asker.role == "parent":
        return [asker.id]
    return [parent.id for parent in family.parents]
