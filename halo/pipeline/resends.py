"""A message the chat app sent again: after a crash kept halo from confirming it, Telegram
delivers it a second time. It is in the transcript already, answered (by the catch-up,
halo/pipeline/missed.py) or still open; either way it is never recorded twice.

A message is open when it is a person's last message in a transcript's tail and no line after
it closes it: a reply line, or an event that `answers` it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from halo.core.envelope import Envelope
from transcripts import TranscriptLine
from transcripts.lines import Closing, Message, Notice, Reply

if TYPE_CHECKING:
    from transcripts import TranscriptStore
    from transcripts.session import TranscriptSessions

OPEN_MESSAGE_TAIL = 40  # lines read back to find a message a crash left open (its tool items sit after it)


@dataclass(frozen=True, slots=True)
class Resend:
    """What a message is: `new`; `answered` already (stay silent); or `open`, to be answered
    now as the line already in the transcript (`envelope` carries that line's id and time)."""

    kind: Literal["new", "answered", "open"]
    envelope: Envelope


class Resends:
    """Finds resent and crash-opened messages; the gateway holds the scope's lock meanwhile."""

    def __init__(self, transcripts: TranscriptStore, sessions: TranscriptSessions) -> None:
        self._transcripts = transcripts
        self._sessions = sessions
        self._seen_since_start: set[str] = set()  # scopes whose transcript end was checked for an open message

    async def check(self, envelope: Envelope) -> Resend:
        """Only a scope's first message with a platform id since the start is looked up: a resend
        follows a crash, and a scope's later messages come after that first one. First of all, the
        scope's transcript is made current in this process (on PostgreSQL: its first turn here)."""
        await self._transcripts.ready(envelope.scope.id)
        if envelope.platform_message_id is None or envelope.scope.id in self._seen_since_start:
            return Resend("new", envelope)
        self._seen_since_start.add(envelope.scope.id)
        tail = await self._tail(envelope.scope.id)
        seen = [line for line in tail if _is_message(line, envelope.platform_message_id)]
        if not seen:
            return Resend("new", envelope)
        found = open_message(tail)
        if found is None or found.id != seen[-1].id:
            return Resend("answered", envelope)
        envelope = replace(envelope, id=found.id, ts=found.ts)
        await self.take_up(envelope)
        return Resend("open", envelope)

    async def still_open(self, envelope: Envelope) -> bool:
        """The message is its scope's open one (not answered meanwhile by the chat app's resend)."""
        found = open_message(await self._tail(envelope.scope.id))
        return found is not None and found.id == envelope.id

    async def take_up(self, envelope: Envelope) -> None:
        """The next model run takes the open message as its input, not a second copy of it."""
        await self._sessions.take_up_last_message(envelope.scope.id)

    async def _tail(self, scope_id: str) -> list[TranscriptLine]:
        await self._transcripts.ready(scope_id)
        return await asyncio.to_thread(self._transcripts.tail, scope_id, OPEN_MESSAGE_TAIL)


def open_message(tail: list[TranscriptLine]) -> Message | None:
    """The last person's message of a transcript's tail when no line after it closes it: a reply
    line, or an event that `answers` it. A message only kept (`unaddressed`) is not open."""
    for line in reversed(tail):
        if isinstance(line, Reply | Notice | Closing):
            return None  # the newest turn was answered (an older reply line without `answers` too)
        if isinstance(line, Message):
            return None if line.unaddressed else line
    return None


def _is_message(line: TranscriptLine, platform_message_id: str) -> bool:
    return isinstance(line, Message) and line.message_id == platform_message_id
