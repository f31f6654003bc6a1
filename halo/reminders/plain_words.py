"""Reminders in plain words, set in code at L0: "remind me to buy milk at 5pm", "can you remind
Wags about the dentist tomorrow at 9?", "remind me at 7:30 to pack my kit".

The time must be clear: a phrase `/remind` understands, with am/pm or minutes ("at 5pm",
"7:30"), or a span ("in 20 minutes"). A bare hour is clear only from 7 to 11 said with
"tomorrow" or "morning" ("tomorrow at 9"); "at 8" or "at 3" could be either half of the day.
The person is me, parents or a member's name. Anything else ("remind us", "on Friday" with
no time, "next month") is left to the model, which can ask. The reply says the time it set.
"""

from __future__ import annotations

import re

from halo.core.turn import Turn
from halo.reminders.service import Reminders, zone_of
from halo.reminders.when import MAX_WHEN_WORDS, When, WhenError, parse_when
from halo.routing.levels import CodeAnswer
from halo.routing.plain import done_in_code, request_of

REASON = "a reminder, set in code from plain words"
_ASK = re.compile(r"^remind (?P<who>[\w'-]+) (?P<rest>.+)$", re.I)
_LINK = ("to", "about", "that")
# words a time phrase may start with ("buy milk | at 5pm", "the dentist | tomorrow at 9")
_STARTS = frozenset(
    {"at", "on", "in", "today", "tomorrow", "every", "this", "next"}
    | {"mon", "tue", "wed", "thu", "fri", "sat", "sun", "monday", "tuesday", "wednesday", "thursday", "friday"}
    | {"saturday", "sunday"}
)
_BARE_HOUR = re.compile(r"(?<![\d:.])(?P<hour>1[0-2]|[1-9])(?![\d:.]|\s*[ap]m)")  # "at 8", not "8pm" or "8:00"
_MORNING = re.compile(r"\b(?:tomorrow|morning)\b")


class ReminderWords:
    """An answerer (halo/pipeline/code_answers.py): the reminder set, or None for the model."""

    def __init__(self, reminders: Reminders) -> None:
        self.reminders = reminders

    async def __call__(self, turn: Turn, on_model_start: object = None) -> CodeAnswer | None:
        asked = _ASK.match(request_of(turn.envelope.text))
        if asked is None or turn.member is None:
            return None
        who = asked["who"].lower()
        if Reminders.target(turn, who)[0] is None:  # "us", "everyone": the model asks who
            return None
        found = self._when_and_text(asked["rest"].split(), turn)
        if found is None:
            return None
        when, text = found
        return done_in_code(await self.reminders.set(turn, who, when, text, urgent=False), REASON)

    def _when_and_text(self, words: list[str], turn: Turn) -> tuple[When, str] | None:
        """`to <text> <when>` or `<when> to <text>`, with a clear time; None otherwise. Only
        phrases as long as a time phrase can be are tried: a long message costs no more than a
        short one on the event loop."""
        if words and words[0].lower() in _LINK:  # the time at the end: the longest one that reads
            for start in range(max(2, len(words) - MAX_WHEN_WORDS), len(words)):
                if words[start].lower() in _STARTS and (when := self._clear(words[start:], turn)) is not None:
                    return when, " ".join(words[1:start])
            return None
        for end in range(1, min(len(words) - 1, MAX_WHEN_WORDS + 1)):  # the time first, then "to ..."
            if words[end].lower() in _LINK and (when := self._clear(words[:end], turn)) is not None:
                return when, " ".join(words[end + 1 :])
        return None

    def _clear(self, words: list[str], turn: Turn) -> When | None:
        phrase = " ".join(words).lower()
        if not phrase.startswith("in ") and not _clear_hours(phrase):
            return None
        try:
            return parse_when(phrase, self.reminders.clock(), zone_of(turn.family))
        except WhenError:
            return None


def _clear_hours(phrase: str) -> bool:
    """No bare hour that could be morning or evening: one from 7 to 11 reads as the morning
    only beside "tomorrow" or "morning"."""
    return all(
        7 <= int(bare["hour"]) <= 11 and _MORNING.search(phrase) is not None for bare in _BARE_HOUR.finditer(phrase)
    )
