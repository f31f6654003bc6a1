"""Which user turns are worth a model's attention: signal kept, greetings and confirmations dropped.

Model extraction is the expensive path; a cheap regex pass first keeps roughly the half of
a conversation that can hold a preference, correction, decision, policy or fact.
"""

from __future__ import annotations

import re
from typing import Literal

SignalKind = Literal["preference", "correction", "policy", "decision", "fact"]

_GREETING = re.compile(
    r"^(?:hi|hello|hey|yo|good (?:morning|afternoon|evening|night)|thanks|thank you|bye|see you)\b", re.I
)
_CONFIRMATION = re.compile(
    r"^(?:ok(?:ay)?|k|got it|sure|yes|yeah|yep|no|nope|cool|great|nice|fine|perfect|lol|thanks|ty)\s*[.!?]*$",
    re.I,
)
_RULES: tuple[tuple[SignalKind, re.Pattern[str]], ...] = (
    ("correction", re.compile(r"^(?:no|nope|actually|wrong|not quite)\b[,.!\s]|\bthat'?s (?:not|wrong)\b", re.I)),
    (
        "preference",
        re.compile(
            r"\bi (?:really )?(?:prefer|like|love|hate|want|need|enjoy|dislike|can'?t stand|don'?t (?:like|want))\b|"
            r"\bmy favou?rite\b|\ballergic\b",
            re.I,
        ),
    ),
    ("policy", re.compile(r"\bwe (?:always|never|usually|don'?t)\b|\b(?:always|never) (?:let|give|use|do)\b", re.I)),
    (
        "decision",
        re.compile(
            r"\blet'?s (?:go with|use|do|pick|book)\b|\bwe (?:decided|chose|(?:wi|')ll go with)\b|"
            r"\bdecided\b",
            re.I,
        ),
    ),
    ("fact", re.compile(r"\b(?:my|our) [\w ]{1,30}? (?:is|are|was|has|starts|ends)\b|\bremember\b|\bnote\b", re.I)),
)
LONG_MESSAGE = 50


def signal_kind(text: str) -> SignalKind | None:
    """The kind of signal a user turn carries, or None for noise."""
    text = text.strip()
    if not text or text.startswith("/"):
        return None
    if _CONFIRMATION.match(text) or (len(text) < 30 and _GREETING.match(text)):
        return None
    for kind, pattern in _RULES:
        if pattern.search(text):
            return kind
    return "fact" if len(text) > LONG_MESSAGE else None
