"""Messages a crash left unanswered, found and answered once when halo starts again.

Telegram confirms an update as soon as halo fetches it, so a `kill -9` mid-turn leaves the
person's message in the transcript with no reply, and nobody will send it again. On start,
each chat app scope whose transcript changed recently is read from its end:

- its last message has a reply line closing it (`answers`), or was only kept (`unaddressed`):
  nothing to do;
- it is younger than `sessions.answer_missed_minutes`: the turn runs again, without
  recording the message twice, and its reply goes through the outbox like any other;
- it is older, up to `sessions.apologise_missed_hours`: one short apology, written to the
  transcript as the reply line before it is queued.

Either way the line written closes the message, so a second start, or a crash during this
one, never answers it twice: a re-run turn writes its reply line before the reply is queued,
exactly as a live turn does. Web and terminal messages are left alone: the request that was
waiting for them died with the process.

The scan reads only tails of transcripts modified within the apology window.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from config.family import Family, Member
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import UnknownScopeError, resolve_scope
from halo.outbound.delivery import Delivery
from halo.pipeline.gateway import Gateway
from halo.pipeline.inbound import GatewayInbound
from halo.pipeline.resends import OPEN_MESSAGE_TAIL, open_message
from transcripts import AuditLog, TranscriptStore
from transcripts.lines import Message, Reply

log = logging.getLogger(__name__)

SORRY = "Sorry, I was restarted before I could answer your last message — could you ask again?"
CHAT_APPS = ("telegram", "discord")  # where a late answer still reaches the person


@dataclass(slots=True)
class CatchUp:
    """What a start-up catch-up did, for the log and for tests."""

    answered: list[str] = field(default_factory=list)  # scope ids
    apologised: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Missed:
    scope_id: str
    line: Message


class MissedMessages:
    def __init__(
        self,
        transcripts: TranscriptStore,
        gateway: Gateway,
        inbound: GatewayInbound,
        delivery: Delivery,
        family: Callable[[], Family],
        audit: AuditLog,
        *,
        answer_within: timedelta,
        apologise_within: timedelta,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._transcripts = transcripts
        self._gateway = gateway
        self._inbound = inbound
        self._delivery = delivery
        self._family = family
        self._audit = audit
        self._answer_within = answer_within
        self._apologise_within = max(apologise_within, answer_within)
        self._clock = clock
        self._started = clock()  # messages from after this are live turns, not left over from a crash

    async def catch_up(self) -> CatchUp:
        """Answer or apologise for every message a crash left open; safe to run on every start."""
        done = CatchUp()
        if self._apologise_within <= timedelta(0):
            return done
        now = self._clock()
        for missed in await asyncio.to_thread(self.find, now):
            age = now - missed.line.ts
            try:
                if age <= self._answer_within and await self._answer(missed):
                    done.answered.append(missed.scope_id)
                elif age > self._answer_within and await self._apologise(missed):
                    done.apologised.append(missed.scope_id)
            except Exception:  # one scope's trouble never stops the others, nor the start
                log.exception("could not catch up on the unanswered message in %s", missed.scope_id)
        self._audit.write("missed_messages_caught_up", answered=len(done.answered), apologised=len(done.apologised))
        if done.answered or done.apologised:
            log.info(
                "after the restart: answered %d unanswered message(s), apologised for %d",
                len(done.answered),
                len(done.apologised),
            )
        return done

    def find(self, now: datetime) -> list[Missed]:
        """The open messages, at most one a scope (a scope handles one message at a time)."""
        oldest = now - self._apologise_within
        found = []
        for scope_id in self._transcripts.scope_ids(written_since=oldest.timestamp()):
            tail = self._transcripts.tail(scope_id, OPEN_MESSAGE_TAIL)
            if not tail or tail[0].scope_id.split(":", 1)[0] not in CHAT_APPS:
                continue
            line = open_message(tail)
            if line is not None and oldest <= line.ts < self._started:
                found.append(Missed(line.scope_id, line))
        return found

    async def _answer(self, missed: Missed) -> bool:
        """True when it was answered now (not by the chat app sending it again meanwhile)."""
        envelope = self._envelope(missed.line)
        if envelope is None:  # the speaker is no longer in the family: no turn to run
            return await self._apologise(missed)
        outcome = await self._inbound.answer_again(envelope)
        if outcome.kind == "silent":
            return False
        self._audit.write("missed_message_answered", scope_id=missed.scope_id, message=missed.line.id)
        return True

    async def _apologise(self, missed: Missed) -> bool:
        line = missed.line
        async with self._gateway.locks.of(line.scope_id):  # no live turn of the scope in between
            tail = await asyncio.to_thread(self._transcripts.tail, line.scope_id, OPEN_MESSAGE_TAIL)
            still_open = open_message(tail)
            if still_open is None or still_open.id != line.id:
                return False
            await self._transcripts.append(
                Reply(
                    id=uuid.uuid4().hex,
                    ts=self._clock(),
                    scope_id=line.scope_id,
                    text=SORRY,
                    speaker="halo",
                    target=line.target,
                    platform=line.platform,
                    reply="command",  # not the model's
                    answers=line.id,
                    restart="apology",
                )
            )
        self._audit.write("missed_message_apology", scope_id=missed.scope_id, message=line.id)
        await self._delivery.send(line.scope_id, SORRY, kind="reply", in_reply_to_envelope=line.id)
        return True

    def _envelope(self, line: Message) -> Envelope | None:
        family = self._family()
        member = family.member(line.speaker or "")
        platform = line.scope_id.split(":", 1)[0]
        user_id = _platform_user_id(member, platform)
        if member is None or user_id is None:
            return None
        try:
            scope = resolve_scope(family, line.scope_id)
        except UnknownScopeError:
            return None
        return Envelope(
            platform="telegram" if platform == "telegram" else "discord",
            scope=scope,
            speaker=Speaker(platform_user_id=user_id, member=member, display_name=member.name),
            text=line.text,
            target=family.member(line.target) if line.target and line.target != member.id else None,
            platform_message_id=line.message_id,
            heard=line.received.heard,  # a voice note stays marked as heard
            ts=line.ts,
            id=line.id,
        )


def _platform_user_id(member: Member | None, platform: str) -> str | None:
    if member is None:
        return None
    user_id = member.telegram_user_id if platform == "telegram" else member.discord_user_id
    return str(user_id) if user_id is not None else None
