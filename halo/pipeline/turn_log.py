"""The turn's transcript lines: the person's message when it is accepted, and the line that
closes it. A message counts as accepted once its line is fsync'd; the closing line (`answers`:
the message it closes) is written before the reply is queued, so a crash in between leaves
the message open for the catch-up (halo/pipeline/missed.py), never answered twice."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from config.settings import RoutingSettings
from halo.core.turn import Turn
from halo.pipeline.intake import Taken, model_input
from halo.pipeline.reply import Reply
from halo.routing.levels import Route
from halo.safety.gate import verdict
from transcripts.lines import Closing, LevelMarks, Message, SafetyMarks
from transcripts.lines import Reply as ReplyLine

if TYPE_CHECKING:
    from transcripts import AuditLog, TranscriptStore
    from transcripts.session import TranscriptSessions


class TurnLog:
    def __init__(
        self,
        transcripts: TranscriptStore,
        sessions: TranscriptSessions,
        audit: AuditLog,
        *,
        routing: Callable[[], RoutingSettings] = RoutingSettings,
    ) -> None:
        self.transcripts = transcripts
        self.sessions = sessions  # settled once the closing line is written
        self.audit = audit  # the level a reply was made at
        # a message that needed no answer (thanks, "ok" in a group) adds nothing the model needs:
        # its line stays in the transcript, out of the model's history (routing.l0_in_history,
        # read at each turn: it applies live)
        self.routing = routing

    async def message(self, taken: Taken) -> None:
        """The person's message, with what intake made of it and the model's view when it
        differs (who said it, in a group)."""
        turn = taken.turn
        env = turn.envelope
        seen_as = model_input(turn)
        target = env.target_member
        state = verdict(turn)
        line = Message(
            id=env.id,
            ts=env.ts,
            scope_id=env.scope.id,
            text=taken.line_text,
            speaker=env.speaker.label,
            target=target.id if target else None,
            platform=env.platform,
            model_input=seen_as if seen_as != env.text else None,
            unaddressed=not env.addressed,  # kept, not to be answered (even after a crash)
            message_id=env.platform_message_id,
            received=taken.marks,
            safety=state.marks() if state is not None and state.flagged else SafetyMarks(),
        )
        await self.transcripts.append(line)

    async def close(self, turn: Turn, reply: Reply) -> None:
        """The line that answers the message: the reply (what the model's history keeps of this
        turn, unless it is a command's), or an event when no reply was made."""
        env = turn.envelope
        level = LevelMarks()  # the level, on the line and in the log
        if reply.route is not None:
            level = _level(reply.route)
            self.audit.write("route", scope_id=env.scope.id, reply=reply.kind, **reply.route.marks())
        state = verdict(turn)  # a guarded turn: the screen's verdict and what halo did
        safety = state.marks(reply=True) if state is not None else SafetyMarks()
        target = env.target_member.id if env.target_member else None
        line: Closing | ReplyLine
        if reply.kind == "provider_error" or reply.kind == "silent" or _budget_spent(reply):
            if reply.kind == "provider_error":
                text, silent = "model unavailable: the message was kept, no reply was made", None
            elif reply.kind == "silent":  # no answer needed (L0)
                text = "no reply needed"
                silent = None if self.routing().l0_in_history else "silent"  # out of the model's history
            else:  # no model left
                text, silent = "the model budget is spent: the message was kept", None
            line = Closing(
                uuid.uuid4().hex,
                datetime.now(UTC),
                env.scope.id,
                text,
                speaker="halo",
                target=target,
                platform=env.platform,
                answers=env.id,
                reply=silent,
                level=level,
                safety=safety,
            )
        else:
            line = ReplyLine(
                uuid.uuid4().hex,
                datetime.now(UTC),
                env.scope.id,
                reply.text or "",
                speaker="halo",
                target=target,
                platform=env.platform,
                reply=reply.kind,
                answers=env.id,
                level=level,
                safety=safety,
            )
        await self.transcripts.append(line)
        await self.sessions.settle(env.scope.id)


def _level(route: Route) -> LevelMarks:
    """The level a reply was made at, as its transcript line says it (`Route.marks` for the log)."""
    return LevelMarks(str(route.level), route.reason, str(route.wanted) if route.capped else None)


def _budget_spent(reply: Reply) -> bool:
    """No model answered because the budget left none (the message stays in the model's history)."""
    return reply.kind == "no_model" and reply.route is not None and reply.route.capped
