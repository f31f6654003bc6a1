"""Times in memory files: local wall-clock for people, and absolute dates, never "today".

A note that says "the dentist is tomorrow" is wrong the day after; memory says
"the dentist is 2026-02-14" instead.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

_RELATIVE = re.compile(r"\b(?:(this|last) (morning|afternoon|evening)|(today|tonight|tomorrow|yesterday))\b", re.I)


def local(ts: datetime) -> datetime:
    """The moment on this machine's clock: daily files and [HH:MM] follow the family's day."""
    return ts.astimezone()


def day_of(ts: datetime) -> date:
    return local(ts).date()


def hhmm(ts: datetime) -> str:
    return local(ts).strftime("%H:%M")


def absolute_dates(text: str, day: date) -> str:
    """Replace today/tomorrow/yesterday/tonight/this morning… with the date they mean on `day`."""

    def repl(m: re.Match[str]) -> str:
        which, part, word = m.group(1), m.group(2), m.group(3)
        if word is not None:
            word = word.lower()
            offset = {"today": 0, "tonight": 0, "tomorrow": 1, "yesterday": -1}[word]
            when = (day + timedelta(days=offset)).isoformat()
            return f"the night of {when}" if word == "tonight" else when
        morning_of = day if which.lower() == "this" else day - timedelta(days=1)
        return f"the {part.lower()} of {morning_of.isoformat()}"

    return _RELATIVE.sub(repl, text)
