"""Decisions halo asks a person for, as buttons: each ask is recorded, and a button carries
only its opaque id.

A message that asks for a decision (a join request, a tool approval, a paused group, a fired
reminder, a home alert) offers `Option`s, each the typed command it stands for (`/approve
K7QP3MZX child Kiran`, `yes 3`, `/mute 2h`). The ask is written to halo.db with who may
decide it, and the message goes through `Delivery` with one `Choice` per option whose id is
`<ask id>.<option>`: never the command, so nothing a platform hands back can name a decision
that was not offered. A press (`claim`) is checked against who may decide, claimed once
(a second press, or one after the ask expired, changes nothing) and answered with the
command, which the caller runs through the same path and policy checks as if it was typed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, select, update

from config.family import Family, Member
from halo.core.options import Option
from halo.db_conn import Conn
from halo.outbound import outbox
from halo.outbound.delivery import Delivery
from halo.outbound.outbox import Row
from halo.port import Choice, OutboundKind
from halo.storage import HaloDB

PARENTS = "@parents"  # who may decide: any parent
MEMBERS = "@members"  # any member (the command's own policy check decides, as for /task); else one member's id
ASK_ID_HEX = 16
__all__ = ["MEMBERS", "PARENTS", "Asks", "Claim", "Option", "may_decide"]

metadata = MetaData()
asks_table = Table(
    "asks",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("options", Text, nullable=False),  # JSON [[label, command or null], …]
    Column("who", String(64), nullable=False),  # PARENTS or a member id
    Column("created", DateTime(timezone=True), nullable=False),
    Column("expires", DateTime(timezone=True), nullable=False),
    Column("decided_at", DateTime(timezone=True)),
    Column("decided_by", String(64)),
    Column("decided", String(64)),  # the label pressed
)


@dataclass(frozen=True, slots=True)
class Claim:
    """What a press may do: `command` to run as the presser (None with `ran`: acknowledged
    only), or why not (`refusal`: the short answer; `refused`: it was not theirs to press)."""

    refusal: str | None = None
    refused: bool = False
    command: str | None = None
    label: str = ""


ALREADY = "Already decided."
GONE = "This has expired."
NOT_YOURS = "Sorry, this decision is not yours to make."
UNKNOWN = "I don't know this button any more."


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)  # SQLite drops the zone


def may_decide(who: str, member: Member | None) -> bool:
    if member is None:
        return False
    if who == MEMBERS:
        return True
    return member.is_parent if who == PARENTS else member.id == who


class Asks:
    """The record of decisions asked as buttons; `family` is the live family."""

    def __init__(
        self,
        db: HaloDB,
        delivery: Delivery,
        family: Callable[[], Family],
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.db = db
        self.delivery = delivery
        self.family = family
        self.clock = clock

    async def record(
        self, options: list[Option], *, who: str, ttl: timedelta, conn: Conn | None = None
    ) -> tuple[Choice, ...]:
        """Write the ask (in the caller's transaction when `conn` is given, opened with this
        module's `metadata`) and return its buttons."""
        ask_id = secrets.token_hex(ASK_ID_HEX // 2)
        now = self.clock()
        values = {
            "id": ask_id,
            "options": json.dumps([[o.label, o.command] for o in options]),
            "who": who,
            "created": now,
            "expires": now + ttl,
        }
        if conn is not None:
            await conn.execute(asks_table.insert().values(**values))
        else:
            async with self.db.write(metadata) as own:
                await own.execute(asks_table.insert().values(**values))
        return tuple(Choice(o.label, f"{ask_id}.{n}") for n, o in enumerate(options))

    async def send(
        self,
        scope_id: str,
        text: str,
        options: list[Option],
        *,
        who: str,
        ttl: timedelta,
        kind: OutboundKind = "notice",
    ) -> str:
        """One message with buttons to one scope; returns the outbox id."""
        choices = await self.record(options, who=who, ttl=ttl)
        return await self.delivery.send(scope_id, text, kind=kind, choices=choices)

    async def to_parents(self, text: str, options: list[Option], *, ttl: timedelta) -> list[str]:
        """One ask, shown in every parent's DM: the first parent to press decides it."""
        choices = await self.record(options, who=PARENTS, ttl=ttl)
        reached = []
        for parent in self.family().parents:
            for scope_id in self.delivery.member_dms(parent.id):
                await self.delivery.send(scope_id, text, choices=choices)
                reached.append(scope_id)
        return reached

    async def add_in(
        self,
        conn: Conn,
        scope_id: str,
        text: str,
        choices: tuple[Choice, ...],
        *,
        kind: OutboundKind = "notice",
        about: str | None = None,
    ) -> Row:
        """A message with buttons recorded (`record(conn=…)`) in the same transaction."""
        return await self.delivery.add_in(conn, scope_id, text, kind=kind, about=about, choices=choices)

    async def claim(self, choice_id: str, member: Member | None) -> Claim:
        """A press of `choice_id` by `member`: claimed for them once, or refused with why."""
        ask_id, _, index = choice_id.partition(".")
        if not index.isdigit() or len(ask_id) != ASK_ID_HEX:
            return Claim(UNKNOWN)
        async with self.db.read(metadata) as conn:
            row = (await conn.execute(select(asks_table).where(asks_table.c.id == ask_id))).mappings().first()
        if row is None:
            return Claim(UNKNOWN)
        options = [Option(label, command) for label, command in json.loads(row["options"])]
        if int(index) >= len(options):
            return Claim(UNKNOWN)
        if not may_decide(row["who"], member):
            return Claim(NOT_YOURS, refused=True)
        if row["decided_at"] is not None:
            return Claim(ALREADY)
        now = self.clock()
        if _aware(row["expires"]) <= now:
            return Claim(GONE)
        option = options[int(index)]
        assert member is not None
        async with self.db.write(metadata) as conn:
            taken = await conn.execute(
                update(asks_table)
                .where(asks_table.c.id == ask_id, asks_table.c.decided_at.is_(None))
                .values(decided_at=now, decided_by=member.id, decided=option.label)
            )
        if not taken.rowcount:  # another press won the race
            return Claim(ALREADY)
        return Claim(command=option.command, label=option.label)


TABLES = (metadata, outbox.metadata)  # an ask and its messages in one transaction
