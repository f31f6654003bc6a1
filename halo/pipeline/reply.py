"""What a turn ends in, `Reply`, and the callbacks a turn's steps share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from halo.core.options import Option
from halo.core.turn import Screened, Turn
from halo.routing.levels import CodeAnswer, Route
from policy import Decision

# "guarded": halo's own reply for a child's turn the guardrails stopped (escalation, deflection)
ReplyKind = Literal["model", "command", "denied", "silent", "kept", "no_model", "provider_error", "guarded"]
DeltaCallback = Callable[[str], Awaitable[None]]
ModelStartCallback = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Reply:
    """What the adapter should do: send `text`, or stay silent when it is None."""

    text: str | None
    scope_id: str
    kind: ReplyKind
    decision: Decision | None = None
    route: Route | None = None  # the level it was answered at, and why (halo/routing)
    offered: tuple[Option, ...] = ()  # buttons under it, each a command any member here may press
    found: Screened | None = None  # a guarded model run: what its guardrails found (halo/pipeline/guarded.py)


AfterTurnHook = Callable[[Turn, Reply], Awaitable[None]]
# answers made in code before the model is asked (status questions in work channels); None: not mine
Answerer = Callable[[Turn, ModelStartCallback | None], Awaitable[CodeAnswer | None]]
TextAnswerer = Callable[[Turn, ModelStartCallback | None], Awaitable[str | None]]


def in_code(answer: TextAnswerer) -> Answerer:
    """An answerer whose text is made in code alone (L0): a parent's yes or no to an approval,
    the note that a document was kept."""

    async def answered(turn: Turn, on_model_start: ModelStartCallback | None) -> CodeAnswer | None:
        text = await answer(turn, on_model_start)
        return CodeAnswer(text) if text is not None else None

    return answered
