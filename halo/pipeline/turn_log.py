"""The turn's transcript lines: the person's message when it is accepted, and the line that
closes it. A message counts as accepted once its line is fsync'd; the closing line (`answers`:
the message it closes) is written before the reply is queued, so a crash in between leaves
the message open for the catch-up (halo/pipeline/missed.py), never answered twice."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from config.settings import RoutingSettings
from halo.core.turn import Turn
from halo.pipeline.intake import Taken, model_input
from halo.pipeline.reply import Reply
from halo.safety.gate import verdict
from transcripts import TranscriptLine

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
        await self._append(
            turn,
            "user",
            taken.line_text,
            model_input=seen_as if seen_as != env.text else None,
            unaddressed=None if env.addressed else True,  # kept, not to be answered (even after a crash)
            message_id=env.platform_message_id,
            **taken.marks,
            **(state.marks() if (state := verdict(turn)) is not None and state.flagged else {}),
        )

    async def close(self, turn: Turn, reply: Reply) -> None:
        """The line that answers the message: the reply (what the model's history keeps of this
        turn, unless it is a command's), or an event when no reply was made."""
        env = turn.envelope
        level: dict[str, str | bool] = {}  # the level, on the line and in the log
        if reply.route is not None:
            level.update(reply.route.marks())
        if reply.route is not None:
            self.audit.write("route", scope_id=env.scope.id, reply=reply.kind, **level)
        if (state := verdict(turn)) is not None:  # a guarded turn: the screen's verdict and what halo did
            level.update(state.marks(reply=True))
        if reply.kind == "provider_error":
            await self._append(
                turn, "event", "model unavailable: the message was kept, no reply was made", answers=env.id, **level
            )
        elif reply.kind == "silent" or _budget_spent(reply):  # no answer needed (L0), or no model left
            what = "no reply needed" if reply.kind == "silent" else "the model budget is spent: the message was kept"
            off_the_record = reply.kind == "silent" and not self.routing().l0_in_history
            await self._append(turn, "event", what, answers=env.id, reply="silent" if off_the_record else None, **level)
        else:
            await self._append(turn, "assistant", reply.text or "", reply=reply.kind, answers=env.id, **level)
        await self.sessions.settle(env.scope.id)

    async def _append(
        self, turn: Turn, role: Literal["user", "assistant", "event"], text: str, **fields: str | bool | None
    ) -> int:
        """Append a transcript line; `fields` (`model_input`, `reply`) are what the session reads."""
        env = turn.envelope
        target = env.target_member
        line = TranscriptLine(
            id=env.id if role == "user" else uuid.uuid4().hex,
            ts=env.ts if role == "user" else datetime.now(UTC),
            scope_id=env.scope.id,
            role=role,
            text=text,
            speaker=env.speaker.label if role == "user" else "halo",
            target=target.id if target else None,
            platform=env.platform,
            extra={k: v for k, v in fields.items() if v is not None},
        )
        return await self.transcripts.append(line)


def _budget_spent(reply: Reply) -> bool:
    """No model answered because the budget left none (the message stays in the model's history)."""
    return reply.kind == "no_model" and reply.route is not None and reply.route.capped
