"""Answers made in code before any model is asked: a /command (halo/commands), then each
answerer in order (a parent's yes or no to an approval, a status question in a work channel);
the first answer wins."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from halo.core.turn import Turn
from halo.pipeline.reply import Answerer, ModelStartCallback

if TYPE_CHECKING:
    from halo.commands.builtin import CommandRegistry


class CodeAnswers:
    def __init__(self, commands: CommandRegistry, answerers: Sequence[Answerer] = ()) -> None:
        self.commands = commands
        self.answerers = list(answerers)

    async def answer(self, turn: Turn, on_model_start: ModelStartCallback | None) -> str | None:
        """The reply, or None when the message is the model's to answer."""
        text = await self.commands.run(turn, turn.envelope.text)
        if text is not None:
            return text
        for answer in self.answerers:
            text = await answer(turn, on_model_start)
            if text is not None:
                return text
        return None
