"""Answers made in code before any model is asked: a /command (halo/commands), then each
answerer in order (a parent's yes or no to an approval, a status question in a work channel);
the first answer wins."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from config.settings import RoutingSettings
from halo.core.options import WithOptions
from halo.core.turn import Turn
from halo.pipeline.reply import Answerer, ModelStartCallback
from halo.routing.levels import CodeAnswer

if TYPE_CHECKING:
    from halo.commands.builtin import CommandRegistry


class CodeAnswers:
    def __init__(self, commands: CommandRegistry, answerers: Sequence[Answerer] = ()) -> None:
        self.commands = commands
        self.answerers = list(answerers)

    async def answer(self, turn: Turn, on_model_start: ModelStartCallback | None) -> CodeAnswer | None:
        """The reply and its level, or None when the message is the model's to answer."""
        said = await self.commands.run(turn, turn.envelope.text)
        if isinstance(said, WithOptions):
            return CodeAnswer(said.text, offered=said.offered)
        if said is not None:
            return CodeAnswer(said)
        for answer in self.answerers:
            answered = await answer(turn, on_model_start)
            if answered is not None:
                return answered
        return None


class PlainWords:
    """ "remind me to … at 5pm", "add milk to the list", "remember that …" answered in code (L0)
    by `answerers`, while `routing.enabled` and `routing.plain_words` are on; both are read at
    each message, so halo.yaml's `routing:` applies live."""

    def __init__(self, answerers: Sequence[Answerer], routing: Callable[[], RoutingSettings]) -> None:
        self.answerers = list(answerers)
        self.routing = routing

    async def __call__(self, turn: Turn, on_model_start: ModelStartCallback | None) -> CodeAnswer | None:
        settings = self.routing()
        if not (settings.enabled and settings.plain_words):
            return None
        for answer in self.answerers:
            answered = await answer(turn, on_model_start)
            if answered is not None:
                return answered
        return None
