"""halo's own messages — pairing requests, group alerts, welcomes — to a scope, through
the adapter of its platform (`halo.port.Adapter.send`).

The composition root registers each adapter here. What halo says in a scope is written to
that scope's transcript like any other reply.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from config.family import Family
from halo.pipeline.scopes import member_scopes
from halo.port import Adapter, Outbound, OutboundKind
from transcripts import TranscriptLine, TranscriptStore

log = logging.getLogger(__name__)


class Delivery:
    """`send(scope_id, text)`, `to_member(member_id, text)`, `to_parents(text)`: the calls the
    rest of halo makes to say something it starts. `family` is a callable: the live family."""

    def __init__(self, transcripts: TranscriptStore, family: Callable[[], Family]) -> None:
        self.transcripts = transcripts
        self._family = family
        self._senders: dict[str, Adapter] = {}

    def register(self, platform: str, sender: Adapter) -> None:
        self._senders[platform] = sender

    def can_send(self, scope_id: str) -> bool:
        return scope_id.partition(":")[0] in self._senders

    def senders(self) -> dict[str, Adapter]:
        """The registered platforms and their senders (the notifier reaches parents through them)."""
        return dict(self._senders)

    async def send(
        self, scope_id: str, text: str, *, kind: OutboundKind = "notice", reply_to: str | None = None
    ) -> str | None:
        """The message's id once the adapter has it; None when no adapter for the scope's
        platform is running (nothing is queued then: the caller's audit event is the record)."""
        sender = self._senders.get(scope_id.partition(":")[0])
        if sender is None:
            return None
        message = Outbound(uuid.uuid4().hex, scope_id, text, kind=kind, reply_to=reply_to, created_at=datetime.now(UTC))
        await sender.send(message)
        await self.transcripts.append(
            TranscriptLine(
                id=uuid.uuid4().hex,
                ts=datetime.now(UTC),
                scope_id=scope_id,
                role="assistant",
                text=text,
                speaker="halo",
                platform=scope_id.partition(":")[0],
            )
        )
        return message.id

    async def to_member(self, member_id: str, text: str, kind: OutboundKind = "notice") -> list[str]:
        """Send to every DM of one member that halo can reach; returns the scope ids reached."""
        reached = []
        for scope in member_scopes(self._family()):
            if scope.type == "dm" and scope.owner_id == member_id and await self.send(scope.id, text, kind=kind):
                reached.append(scope.id)
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
