"""Schedules written the way a family writes them: "mon-fri 17:00", "daily 09:30"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import time

_SPEC = re.compile(r"^\s*(daily|[a-z]{3}(?:\s*[-,]\s*[a-z]{3})*)\s+(\d{1,2}):(\d{2})\s*$", re.I)
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@dataclass(frozen=True, slots=True)
class DigestSchedule:
    days: str  # APScheduler day_of_week: "mon-fri", "*"
    at: time


def parse_schedule(spec: str) -> DigestSchedule:
    """ "mon-fri 17:00" → days and time; ValueError says what a good one looks like."""
    found = _SPEC.match(spec)
    hint = 'expected days and a time, e.g. "mon-fri 17:00" or "daily 09:30"'
    if found is None:
        raise ValueError(f"{spec!r}: {hint}")
    days, hour, minute = found.group(1).lower().replace(" ", ""), int(found.group(2)), int(found.group(3))
    if days != "daily" and any(d not in _DAYS for d in re.split(r"[-,]", days)):
        raise ValueError(f"{spec!r}: days are {', '.join(_DAYS)} ({hint})")
    if hour > 23 or minute > 59:
        raise ValueError(f"{spec!r}: {hour:02d}:{minute:02d} is not a time of day")
    return DigestSchedule("*" if days == "daily" else days, time(hour, minute))
