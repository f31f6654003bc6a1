"""A list in plain words, kept in code at L0: "add eggs and bread to the shopping list", "add a
charger to my list", "what's on the shopping list?". `the`, `my` and `our` list mean this chat's
list; a word before "list" names one ("shopping"). Anything longer ("what's on our list for the
weekend?") is left to the model.
"""

from __future__ import annotations

import re

from halo.core.turn import Turn
from halo.lists.service import Lists
from halo.routing.levels import CodeAnswer
from halo.routing.plain import done_in_code, request_of

_ADD = re.compile(
    r"^add (?P<items>.+?) (?:to|on|onto) (?:(?:the|my|our|this) |(?P<owner>[a-z]+'s) )(?:(?P<name>[a-z]+) )?list$", re.I
)
_SHOW = re.compile(r"^(?:what'?s|what is|show(?: me)?) (?:on )?(?:the|my|our|this) (?:(?P<name>[a-z]+) )?list$", re.I)
_SEPARATORS = re.compile(r",\s*(?:and\s+)?|\s+and\s+|\s*&\s*", re.I)


class ListWords:
    """An answerer (halo/pipeline/code_answers.py): the list changed or shown, or None for the model."""

    def __init__(self, lists: Lists) -> None:
        self.lists = lists

    async def __call__(self, turn: Turn, on_model_start: object = None) -> CodeAnswer | None:
        request = request_of(turn.envelope.text)
        if (adding := _ADD.match(request)) is not None:
            items = [item for item in _SEPARATORS.split(adding["items"]) if item.strip()]
            name = " ".join(w for w in (adding["owner"], adding["name"]) if w) or None  # "mom's shopping"
            changed = await self.lists.add(turn, _name(name), items)
            return done_in_code(changed, "a list change, made in code from plain words")
        if (showing := _SHOW.match(request)) is not None:
            return done_in_code(await self.lists.show(turn, _name(showing["name"])), "a list, shown in code")
        return None


def _name(word: str | None) -> str | None:
    return word.lower() if word else None
