""" "Remember …" in plain words, kept in code at L0 as `/remember` keeps it: "remember that Tara
is allergic to peanuts", "please remember my locker code is on the blue card". Only a message
that is one fact to keep (memory/rules.py reads it so); anything more is the model's.
"""

from __future__ import annotations

import re

from halo.commands.memory_actions import MemoryActions
from halo.core.turn import Turn
from halo.routing.levels import CodeAnswer
from halo.routing.plain import done_in_code, request_of
from memory.rules import Durable, classify

_REMEMBER = re.compile(r"^remember (?:that )?(?!to )(?P<fact>.+)$", re.I)  # "remember to …" wants a reminder


class RememberWords:
    """An answerer (halo/pipeline/code_answers.py): the fact kept, or None for the model."""

    def __init__(self, actions: MemoryActions) -> None:
        self.actions = actions

    async def __call__(self, turn: Turn, on_model_start: object = None) -> CodeAnswer | None:
        text = turn.envelope.text
        asked = _REMEMBER.match(request_of(text))
        if asked is None or "?" in text or [type(a) for a in classify(text)] != [Durable]:
            return None
        return done_in_code(await self.actions.remember(turn, asked["fact"]), "a fact, kept in code from plain words")
