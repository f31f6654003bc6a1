"""Pairing: a stranger who writes to halo asks to join; a parent approves or denies.

The stranger gets one short reply with a code and their message goes nowhere else: no
transcript, no model. Parents are told in their DMs. Each sender gets at most one reply
per request — while a request is pending (one hour) or after it was denied, further
messages get silence, so writing to halo cannot be used to make it write back. At most
`MAX_PENDING` requests are open at once.

Requests live in halo.db so the admin dashboard can list and decide them too
(`list_pending`, `approve`, `deny`). Callers authorise: the chat commands ask the policy
whether the speaker may administer halo, the admin API requires its token.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, select, update

from config.family import AgeGroup, Member, Role
from config.loader import ConfigError
from halo.core.envelope import Speaker
from halo.family.members import FamilyEditor
from halo.outbound.asks import Asks, Option
from halo.outbound.delivery import Delivery
from halo.storage import HaloDB
from policy import PolicyEngine
from transcripts import AuditLog

log = logging.getLogger(__name__)

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # no 0/O, 1/I/L look-alikes
CODE_LENGTH = 8
CODE_TTL_SECONDS = 3600.0
MAX_PENDING = 3
ROLES: tuple[Role, ...] = ("parent", "child", "colleague")
AGE_GROUPS: tuple[AgeGroup, ...] = ("young_child", "adolescent")
APPROVE_USAGE = "CODE ROLE NAME [young_child|adolescent]"

Status = Literal["pending", "overflow", "approved", "denied"]

metadata = MetaData()
requests_table = Table(
    "pairing_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("code", String(16), nullable=False, index=True),
    Column("platform", String(32), nullable=False),
    Column("platform_user_id", String(64), nullable=False),
    Column("display_name", String(256)),
    Column("username", String(256)),
    Column("status", String(16), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("decided_at", Float),
    Column("decided_by", String(64)),
    Column("member_id", String(64)),
)


class PairingError(ValueError):
    """A request cannot be decided; the message says why, for the person who asked."""


class UnknownCode(PairingError, LookupError):
    """No open request has this code: it never existed, was decided already, or expired.
    Callers that answer differently for "no such thing" (the admin API's 404) catch this."""


@dataclass(frozen=True, slots=True)
class PairingRequest:
    code: str
    platform: str
    platform_user_id: str
    display_name: str | None
    username: str | None
    status: Status
    created_at: datetime
    expires_at: datetime
    decided_by: str | None = None
    member_id: str | None = None

    @property
    def who(self) -> str:
        """ "Kiran S., @kiran" — how parents are told who is asking."""
        handle = f"@{self.username}" if self.username else "no username"
        return f"{self.display_name or 'no name'}, {handle}"

    @property
    def suggested_name(self) -> str:
        first = (self.display_name or "").split()
        return first[0] if first else "NAME"


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def stranger_reply(code: str) -> str:
    return (
        f"Hi! I'm this family's assistant and I don't know you yet. Your code is {code}. "
        "A parent can let you in with it; it is valid for one hour."
    )


OVERFLOW_REPLY = (
    "Hi! I'm this family's assistant and I don't know you yet. I can't take more join "
    "requests right now — please ask a parent in the family to add you."
)


def parent_notice(request: PairingRequest) -> str:
    return (
        f"Someone ({request.who}, {request.platform} id {request.platform_user_id}) asks to join — "
        f"/approve {request.code} child {request.suggested_name} or /deny {request.code}\n"
        "(roles: parent, child, colleague; for a child you may add young_child or adolescent; "
        "the code is valid for one hour)"
    )


def decisions(request: PairingRequest) -> list[Option]:
    """The notice's buttons: each the /approve or /deny a parent could type."""
    code, name = request.code, request.suggested_name
    return [
        Option("Parent", f"/approve {code} parent {name}"),
        Option("Child (young)", f"/approve {code} child {name} young_child"),
        Option("Child (adolescent)", f"/approve {code} child {name} adolescent"),
        Option("Colleague", f"/approve {code} colleague {name}"),
        Option("Deny", f"/deny {code}"),
    ]


class Pairing:
    def __init__(
        self,
        db: HaloDB,
        members: FamilyEditor,
        policy: PolicyEngine,
        delivery: Delivery,
        audit: AuditLog,
        asks: Asks | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.asks = asks  # the parents' notice carries buttons (halo/outbound/asks.py)
        self.db = db
        self.members = members
        self.policy = policy
        self.delivery = delivery
        self.audit = audit
        self.clock = clock
        self._deciding = asyncio.Lock()

    async def on_stranger(self, platform: str, speaker: Speaker) -> str | None:
        """A DM from someone the family config does not know: the one reply to send, or None."""
        now = self.clock()
        uid = speaker.platform_user_id
        async with self.db.write(metadata) as conn:
            latest = (
                (
                    await conn.execute(
                        select(requests_table)
                        .where(requests_table.c.platform == platform, requests_table.c.platform_user_id == uid)
                        .order_by(requests_table.c.id.desc())
                        .limit(1)
                    )
                )
                .mappings()
                .first()
            )
            if latest is not None:
                if latest["status"] == "denied":
                    return None
                if latest["status"] in ("pending", "overflow") and latest["expires_at"] > now:
                    return None
            open_codes = set(
                (
                    await conn.execute(
                        select(requests_table.c.code).where(
                            requests_table.c.status == "pending", requests_table.c.expires_at > now
                        )
                    )
                ).scalars()
            )
            status: Status = "pending" if len(open_codes) < MAX_PENDING else "overflow"
            code = new_code()
            while code in open_codes:
                code = new_code()
            row = {
                "code": code,
                "platform": platform,
                "platform_user_id": uid,
                "display_name": speaker.display_name,
                "username": speaker.username,
                "status": status,
                "created_at": now,
                "expires_at": now + CODE_TTL_SECONDS,
            }
            await conn.execute(requests_table.insert().values(**row))
        request = _request(row)
        if status == "overflow":
            self.audit.write("pairing_overflow", platform=platform, platform_user_id=uid, who=request.who)
            return OVERFLOW_REPLY
        self.audit.write("pairing_requested", platform=platform, platform_user_id=uid, who=request.who, code=code)
        if self.asks is None:
            await self.delivery.to_parents(parent_notice(request))
        else:
            ttl = timedelta(seconds=CODE_TTL_SECONDS)
            await self.asks.to_parents(parent_notice(request), decisions(request), ttl=ttl)
        return stranger_reply(code)

    async def list_pending(self) -> list[PairingRequest]:
        """Open requests, oldest first (expired ones are not listed)."""
        async with self.db.read(metadata) as conn:
            rows = (
                (
                    await conn.execute(
                        select(requests_table)
                        .where(requests_table.c.status == "pending", requests_table.c.expires_at > self.clock())
                        .order_by(requests_table.c.id)
                    )
                )
                .mappings()
                .all()
            )
        return [_request(r) for r in rows]

    async def approve(self, code: str, *, role: Role, name: str, age_group: AgeGroup | None = None, by: str) -> Member:
        """Add the requester to halo.yaml as `name` with `role` and tell them. Raises PairingError."""
        if role not in ROLES:
            raise PairingError(f"{role!r} is not a role; use one of {', '.join(ROLES)}.")
        if age_group is not None and (role != "child" or age_group not in AGE_GROUPS):
            raise PairingError(f"age group is for children: {' or '.join(AGE_GROUPS)}.")
        if not name.strip():
            raise PairingError("Say what to call them: /approve CODE ROLE NAME.")
        async with self._deciding:
            request = await self._pending(code)
            try:
                member = await self.members.add_member(
                    name=name.strip(),
                    role=role,
                    age_group=age_group,
                    platform=request.platform,
                    platform_user_id=request.platform_user_id,
                )
            except ConfigError as exc:
                raise PairingError(f"halo.yaml was not changed: {exc}") from None
            await self._decide(request.code, "approved", by, member_id=member.id)
        self.audit.write(
            "pairing_approved",
            code=request.code,
            by=by,
            member_id=member.id,
            role=role,
            platform=request.platform,
            platform_user_id=request.platform_user_id,
        )
        welcome = f"Welcome, {member.name}! A parent let you in — talk to me any time."
        await self.delivery.to_member(member.id, welcome)
        return member

    async def deny(self, code: str, *, by: str) -> PairingRequest:
        """Refuse a request; the sender is not told and gets no further replies."""
        async with self._deciding:
            request = await self._pending(code, allow_expired=True)
            await self._decide(request.code, "denied", by)
        self.audit.write(
            "pairing_denied",
            code=request.code,
            by=by,
            platform=request.platform,
            platform_user_id=request.platform_user_id,
        )
        return request

    async def _pending(self, code: str, allow_expired: bool = False) -> PairingRequest:
        code = code.strip().upper()
        async with self.db.read(metadata) as conn:
            row = (
                (
                    await conn.execute(
                        select(requests_table)
                        .where(requests_table.c.code == code, requests_table.c.status == "pending")
                        .order_by(requests_table.c.id.desc())
                        .limit(1)
                    )
                )
                .mappings()
                .first()
            )
        if row is None:
            raise UnknownCode(f"There is no open request with code {code}.")
        if not allow_expired and row["expires_at"] <= self.clock():
            raise UnknownCode(f"Code {code} has expired; they can write to me again for a new one.")
        return _request(row)

    async def _decide(self, code: str, status: Status, by: str, member_id: str | None = None) -> None:
        async with self.db.write(metadata) as conn:
            await conn.execute(
                update(requests_table)
                .where(requests_table.c.code == code, requests_table.c.status == "pending")
                .values(status=status, decided_at=self.clock(), decided_by=by, member_id=member_id)
            )


def _request(row: Any) -> PairingRequest:
    return PairingRequest(
        code=row["code"],
        platform=row["platform"],
        platform_user_id=row["platform_user_id"],
        display_name=row["display_name"],
        username=row["username"],
        status=row["status"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        expires_at=datetime.fromtimestamp(row["expires_at"], UTC),
        decided_by=row.get("decided_by"),
        member_id=row.get("member_id"),
    )


def parse_approve(args: str) -> tuple[str, Role, str, AgeGroup | None]:
    """`CODE ROLE NAME [AGE_GROUP]` → its parts. Raises PairingError with the usage."""
    words = args.split()
    if len(words) < 3:
        raise PairingError(f"Usage: /approve {APPROVE_USAGE}, e.g. /approve K7QP3MZX child Aarav")
    code, role, rest = words[0], words[1].lower(), words[2:]
    age_group: Any = rest.pop().lower() if len(rest) > 1 and rest[-1].lower() in AGE_GROUPS else None
    if role not in ROLES:
        raise PairingError(f"{words[1]!r} is not a role; use one of {', '.join(ROLES)}.")
    return code, role, " ".join(rest), age_group  # type: ignore[return-value]
