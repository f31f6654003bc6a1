"""The parents group is used only while everyone seen in it may be there.

When someone the policy would not let converse in a configured parents group writes
there or joins it (a child, a stranger, an unknown bot), halo stops using the group: the
scope is marked suspended, and the `group-suspended` policy then refuses everything in
and from it — conversation, memory, proactive messages. The parents are told in their
DMs and the audit log records it. The group comes back only when a parent runs /resume
and nobody who may not be there is still in it.

State lives in halo.db so a restart does not quietly reopen a suspended group.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import Column, Float, MetaData, String, Table, delete, select

from config.family import Member
from halo.core.envelope import Envelope, Scope, Speaker
from halo.core.options import WithOptions
from halo.outbound.asks import Asks, Option
from halo.outbound.delivery import Delivery
from halo.storage import HaloDB
from policy import PolicyEngine
from transcripts import AuditLog

if TYPE_CHECKING:
    from halo.core.turn import Turn


class MatchedCommand(Protocol):
    """A command a message names (halo/commands' `Command`): the family layer sits below the
    commands, so it knows them only by this much."""

    @property
    def name(self) -> str: ...

    @property
    def handler(self) -> Callable[[Turn, str], Awaitable[str | WithOptions]]: ...


class CommandMatcher(Protocol):
    def match(self, text: str) -> tuple[MatchedCommand, str] | None: ...


log = logging.getLogger(__name__)

RESUME_ASK_LASTS = timedelta(days=7)  # the notice's button; /resume typed works any time

GUARDED_TYPES = frozenset({"parents_group"})

# Asks a platform whether a user is still in a chat: True/False, or None when it cannot tell.
PresenceCheck = Callable[[str, str], Awaitable[bool | None]]

metadata = MetaData()
suspended_table = Table(
    "suspended_groups",
    metadata,
    Column("scope_id", String(128), primary_key=True),
    Column("since", Float, nullable=False),
)
intruders_table = Table(
    "group_intruders",
    metadata,
    Column("scope_id", String(128), primary_key=True),
    Column("platform_user_id", String(64), primary_key=True),
    Column("label", String(256), nullable=False),
    Column("seen_at", Float, nullable=False),
)


def describe(speaker: Speaker) -> str:
    """How parents are told who was seen: "Aarav (child)", "someone I don't know (Kiran, @kiran)"."""
    if speaker.member is not None:
        return f"{speaker.member.name} ({speaker.member.role})"
    handle = f", @{speaker.username}" if speaker.username else ""
    return f"someone I don't know ({speaker.display_name or 'no name'}{handle}, id {speaker.platform_user_id})"


class GroupGuard:
    def __init__(
        self, db: HaloDB, policy: PolicyEngine, delivery: Delivery, audit: AuditLog, asks: Asks | None = None
    ) -> None:
        self.db = db
        self.policy = policy
        self.delivery = delivery
        self.audit = audit
        self.asks = asks  # the notice carries a "resume" button (/resume)
        self.presence: dict[str, PresenceCheck] = {}
        # suspended scope id → {platform user id: label} of those seen there who may not be
        self._suspended: dict[str, dict[str, str]] | None = None

    def register_presence(self, platform: str, check: PresenceCheck) -> None:
        self.presence[platform] = check

    @staticmethod
    def guards(scope: Scope) -> bool:
        return scope.type in GUARDED_TYPES and scope.configured

    async def _state(self) -> dict[str, dict[str, str]]:
        if self._suspended is None:
            async with self.db.read(metadata) as conn:
                scopes = (await conn.execute(select(suspended_table.c.scope_id))).scalars().all()
                rows = (await conn.execute(select(intruders_table))).mappings().all()
            state: dict[str, dict[str, str]] = {scope_id: {} for scope_id in scopes}
            for row in rows:
                state.setdefault(row["scope_id"], {})[row["platform_user_id"]] = row["label"]
            self._suspended = state
        return self._suspended

    async def suspended_scopes(self) -> list[str]:
        return sorted(await self._state())

    async def current(self, envelope: Envelope) -> Envelope:
        """The envelope with its scope marked suspended when halo stopped using that group."""
        if not self.guards(envelope.scope) or envelope.scope.id not in await self._state():
            return envelope
        return replace(envelope, scope=replace(envelope.scope, suspended=True))

    def may_be_there(self, scope: Scope, speaker: Speaker) -> bool:
        """Would the policy let this person converse in the group, were it not suspended?"""
        return self.policy.decide(
            "converse",
            principal=speaker.member,
            resource=replace(scope, suspended=False),
            unknown_id=None if speaker.member else speaker.platform_user_id,
            audit=False,
        ).allowed

    async def on_denied(self, turn: Turn, commands: CommandMatcher) -> str | None:
        """A message the policy refused in a guarded group. Someone who may not be there
        suspends the group; a parent's /resume in a suspended group is the one thing
        answered there. Returns the reply to send in the group, if any."""
        env = turn.envelope
        if not await self.seen(env.scope, env.speaker, "wrote there"):
            return None
        found = commands.match(env.text)
        if env.scope.suspended and found is not None and found[0].name == "resume":
            resumed = await found[0].handler(turn, found[1])
            return resumed if isinstance(resumed, str) else resumed.text
        return None

    async def seen(self, scope: Scope, speaker: Speaker, how: str) -> bool:
        """Someone is in the group (they wrote, or joined). Returns False, after suspending
        the group, when they may not be there."""
        if not self.guards(scope) or self.may_be_there(scope, speaker):
            return True
        state = await self._state()
        first = scope.id not in state
        label = describe(speaker)
        async with self.db.write(metadata) as conn:
            if first:
                await conn.execute(suspended_table.insert().values(scope_id=scope.id, since=time.time()))
            await conn.execute(
                intruders_table.delete().where(
                    intruders_table.c.scope_id == scope.id,
                    intruders_table.c.platform_user_id == speaker.platform_user_id,
                )
            )
            await conn.execute(
                intruders_table.insert().values(
                    scope_id=scope.id,
                    platform_user_id=speaker.platform_user_id,
                    label=label,
                    seen_at=time.time(),
                )
            )
        state.setdefault(scope.id, {})[speaker.platform_user_id] = label
        self.audit.write(
            "group_suspended" if first else "group_intruder",
            scope_id=scope.id,
            who=label,
            speaker=speaker.label,
            how=how,
        )
        if first:
            notice = (
                f"I've stopped using the parents group: {label} {how}. Only parents may be in it. "
                "Remove them from the group, then send /resume (here or in the group)."
            )
            if self.asks is None:
                await self.delivery.to_parents(notice)
            else:
                await self.asks.to_parents(notice, [Option("Resume", "/resume")], ttl=RESUME_ASK_LASTS)
        return False

    async def left(self, scope_id: str, platform_user_id: str) -> None:
        """Someone left the group; once nobody who may not be there is left, /resume can work."""
        state = await self._state()
        if platform_user_id not in state.get(scope_id, {}):
            return
        await self._forget(scope_id, [platform_user_id])
        self.audit.write("group_intruder_left", scope_id=scope_id, platform_user_id=platform_user_id)

    async def resume(self, by: Member, scope_id: str | None = None) -> str:
        """Start using a suspended group again (the one given, or every one) if nobody who
        may not be there is still in it. The caller has checked that `by` may administer halo."""
        state = await self._state()
        targets = [scope_id] if scope_id is not None else sorted(state)
        targets = [t for t in targets if t in state]
        if not targets:
            return "Nothing to resume: I'm not keeping away from any group."
        replies = []
        for target in targets:
            still = await self._still_there(target, state[target])
            if still:
                replies.append(
                    f"{', '.join(still)} is still in the group, so I stay away. Remove them, then send /resume again."
                )
                continue
            await self._forget(target, None)
            self.audit.write("group_resumed", scope_id=target, by=by.id)
            replies.append("Resumed: I'm back in the parents group.")
        return "\n".join(replies)

    async def _still_there(self, scope_id: str, intruders: dict[str, str]) -> list[str]:
        """Labels of those who have not been seen leaving; the platform is asked about each,
        and anyone it cannot vouch for as gone counts as still there."""
        check = self.presence.get(scope_id.partition(":")[0])
        still: list[str] = []
        gone: list[str] = []
        for user_id, label in intruders.items():
            present = await check(scope_id, user_id) if check is not None else None
            if present is False:
                gone.append(user_id)
            else:
                still.append(label)
        if gone:
            await self._forget(scope_id, gone)
        return still

    async def _forget(self, scope_id: str, user_ids: list[str] | None) -> None:
        """Drop some intruders, or (None) all of them and the suspension itself."""
        query = delete(intruders_table).where(intruders_table.c.scope_id == scope_id)
        if user_ids is not None:
            query = query.where(intruders_table.c.platform_user_id.in_(user_ids))
        async with self.db.write(metadata) as conn:
            await conn.execute(query)
            if user_ids is None:
                await conn.execute(delete(suspended_table).where(suspended_table.c.scope_id == scope_id))
        state = await self._state()
        if user_ids is None:
            state.pop(scope_id, None)
        else:
            for user_id in user_ids:
                state.get(scope_id, {}).pop(user_id, None)
