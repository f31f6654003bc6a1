"""Requests code carries out from plain words, at L0: issue 25's "anything a deterministic
handler owns". A reminder with a clear time, items for a list, what a list holds: each feature
reads its own words (halo/reminders/plain_words.py, halo/lists/plain_words.py) and does the
same as its command would, asking the policy the same way. Words that leave anything unclear
(a time without am or pm, a day without a time, "us") are the model's, as before.
"""

from __future__ import annotations

import re

from halo.routing.levels import CodeAnswer, Level, Route

_POLITE = re.compile(
    r"^(?:(?:hey |hi |ok |okay )?halo[,:]?\s+)?(?:please\s+|(?:can|could|would|will) you(?: please)?\s+)?", re.I
)


def request_of(text: str) -> str:
    """The request without its polite wrapping and end punctuation: "Can you add milk to the
    list, please?" -> "add milk to the list"."""
    body = _POLITE.sub("", " ".join(text.split()), count=1)
    return body.rstrip(" ?!.").removesuffix(" please").rstrip(" ,")


def done_in_code(text: str, reason: str) -> CodeAnswer:
    """A reply made in code, marked L0 on the transcript line and in the audit log."""
    return CodeAnswer(text, Route(Level.L0, reason))
