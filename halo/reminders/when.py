"""When a reminder fires: the phrases `/remind` and the model's `set_reminder` understand.

`in 20m`, `in 2h`, `at 18:30`, `tomorrow 7:30`, `mon 9:00`, `at 7 tomorrow`, `7pm`, and the
recurring `every weekday 7:30`, `every day 20:00`, `every sunday 18:00`. Wall-clock times are
in the family's time zone. Every clock time, one-off or recurring, is an APScheduler
`CronTrigger` in that zone, so daylight saving is the library's arithmetic, not ours: a time
that does not exist on the spring-forward day fires an hour later, and a time that happens
twice on the fall-back day fires once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from halo.core.times import say_time

MAX_AHEAD = timedelta(days=366)  # "in 9999h" is a typo, not a plan
MAX_WHEN_WORDS = 6  # the longest time phrase: "every weekday at 7:30", "on friday at 6 pm"

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_NAMES = {
    **{d: d for d in _DAYS},
    "monday": "mon", "tuesday": "tue", "tues": "tue", "wednesday": "wed", "thursday": "thu",
    "thur": "thu", "thurs": "thu", "friday": "fri", "saturday": "sat", "sunday": "sun",
}  # fmt: skip
# every …: the cron day_of_week each phrase means
_EVERY = {"day": "*", "weekday": "mon-fri", "weekdays": "mon-fri", "weekend": "sat,sun", **_DAY_NAMES}
_EVERY_TEXT = {"*": "day", "mon-fri": "weekday", "sat,sun": "weekend"}
_FULL = {"mon": "monday", "tue": "tuesday", "wed": "wednesday", "thu": "thursday", "fri": "friday",
         "sat": "saturday", "sun": "sunday"}  # fmt: skip

_CLOCK = re.compile(r"(?P<h>\d{1,2})(?:[:.](?P<m>\d{2}))?\s*(?P<ampm>am|pm)?")
_SPAN = re.compile(r"(?P<n>\d+)\s*(?P<unit>minutes?|mins?|m|hours?|hrs?|h|days?|d)")

WHEN_FORMS = (
    "in 20m · in 2h · at 18:30 · tomorrow 7:30 · mon 9:00 · every weekday 7:30 · every day 20:00 · every sunday 18:00"
)


class WhenError(ValueError):
    """A time phrase halo does not understand; the message says what it does understand."""


@dataclass(frozen=True, slots=True)
class Recurrence:
    """`every <days> HH:MM`: `days` is a cron day_of_week ("*", "mon-fri", "sun")."""

    days: str
    hour: int
    minute: int

    @classmethod
    def parse(cls, stored: str) -> Recurrence:
        """The form `str()` gives: "mon-fri 07:30"."""
        days, _, clock = stored.partition(" ")
        hour, _, minute = clock.partition(":")
        return cls(days, int(hour), int(minute))

    def __str__(self) -> str:
        return f"{self.days} {self.hour:02d}:{self.minute:02d}"

    def describe(self) -> str:
        days = _EVERY_TEXT.get(self.days) or _FULL.get(self.days, self.days)
        return f"every {days} {self.hour:02d}:{self.minute:02d}"

    def trigger(self, zone: ZoneInfo) -> CronTrigger:
        return CronTrigger(day_of_week=self.days, hour=self.hour, minute=self.minute, timezone=zone)

    def next_after(self, after: datetime, zone: ZoneInfo) -> datetime:
        """The first occurrence strictly after `after` (UTC). A wall-clock time the fall-back
        hour repeats is one occurrence, not two."""
        trigger = self.trigger(zone)
        previous = after.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)
        start = after + timedelta(seconds=1)
        while True:
            found = _first(trigger, start)
            if found.astimezone(zone).replace(tzinfo=None) != previous:
                return found
            start = found + timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class When:
    """A parsed phrase: the first time (UTC), and the rule for the next ones when it repeats."""

    first: datetime
    every: Recurrence | None = None


def _first(trigger: CronTrigger, start: datetime) -> datetime:
    found = trigger.get_next_fire_time(None, start)
    if found is None:  # a trigger with no end always has a next time; guard the type
        raise WhenError("That time never comes.")
    return found.astimezone(UTC)


def _clock(token: str) -> tuple[int, int] | None:
    match = _CLOCK.fullmatch(token)
    if match is None:
        return None
    hour, minute = int(match["h"]), int(match["m"] or 0)
    if match["ampm"]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if match["ampm"] == "pm" else 0)
    elif match["m"] is None and token.isdigit() and len(token) > 2:
        return None
    if hour > 23 or minute > 59:
        return None
    return hour, minute


def _tokens(text: str) -> list[str]:
    """Lower-case words, with "7 pm" joined to "7pm" and a trailing comma dropped."""
    words = [w.strip(",") for w in text.lower().split()]
    joined: list[str] = []
    for word in words:
        if word in ("am", "pm") and joined and joined[-1][:1].isdigit():
            joined[-1] += word
        elif word:
            joined.append(word)
    return joined


def parse_when(text: str, now: datetime, zone: ZoneInfo) -> When:
    """The whole of `text` as a time phrase, resolved against `now` (aware) in `zone`."""
    words = _tokens(text)
    if not words:
        raise WhenError(f"When? Say it like: {WHEN_FORMS}")
    if words[0] == "in":
        return When(_span(words[1:], now))
    if words[0] == "every":
        return _every(words[1:], now, zone)
    return _clock_time(words, now, zone)


def _span(words: list[str], now: datetime) -> datetime:
    text = "".join(w for w in words if w != "and")
    total = timedelta()
    position = 0
    for match in _SPAN.finditer(text):
        if match.start() != position:
            break
        n, unit = int(match["n"]), match["unit"][0]
        total += {"m": timedelta(minutes=n), "h": timedelta(hours=n), "d": timedelta(days=n)}[unit]
        position = match.end()
    if not text or position != len(text) or total <= timedelta():
        raise WhenError(f"I can't read {'in ' + ' '.join(words)!r} as a time span (say: in 20m, in 2h).")
    if total > MAX_AHEAD:
        raise WhenError("That is more than a year away.")
    return (now + total).astimezone(UTC)


def _every(words: list[str], now: datetime, zone: ZoneInfo) -> When:
    days = clock = None
    for word in words:
        if word == "at":
            continue
        if days is None and word in _EVERY:
            days = _EVERY[word]
        elif clock is None and (found := _clock(word)) is not None:
            clock = found
        else:
            raise WhenError(f"I can't read {'every ' + ' '.join(words)!r} (say: every weekday 7:30).")
    if days is None or clock is None:
        raise WhenError("Say which days and what time: every weekday 7:30, every day 20:00, every sunday 18:00.")
    rule = Recurrence(days, *clock)
    return When(_first(rule.trigger(zone), now), rule)


def _clock_time(words: list[str], now: datetime, zone: ZoneInfo) -> When:
    day: str | None = None
    clock: tuple[int, int] | None = None
    for word in words:
        if word in ("at", "on", "next", "this"):
            continue
        if day is None and (word in ("today", "tonight", "tomorrow") or word in _DAY_NAMES):
            day = word
        elif clock is None and (found := _clock(word)) is not None:
            clock = found
        else:
            raise WhenError(f"I can't read {' '.join(words)!r} as a time. Say it like: {WHEN_FORMS}")
    if clock is None:
        raise WhenError(f"What time? Say it like: {WHEN_FORMS}")
    hour, minute = clock
    local_now = now.astimezone(zone)
    if day in ("today", "tonight"):
        today = _first(CronTrigger(hour=hour, minute=minute, timezone=zone), now)
        if today.astimezone(zone).date() != local_now.date():
            raise WhenError(f"{hour:02d}:{minute:02d} today has passed.")
        return When(today)
    if day == "tomorrow":
        midnight = datetime.combine(local_now.date() + timedelta(days=1), datetime.min.time(), zone)
        return When(_first(CronTrigger(hour=hour, minute=minute, timezone=zone), midnight))
    weekday = _DAY_NAMES[day] if day else "*"
    return When(_first(CronTrigger(day_of_week=weekday, hour=hour, minute=minute, timezone=zone), now))


def describe(at: datetime, zone: ZoneInfo, now: datetime) -> str:
    """ "Tue 14 Jan, 07:00": the one format halo writes times in (halo/core/times.py)."""
    return say_time(at, zone, now)


def split_when(words: list[str], now: datetime, zone: ZoneInfo) -> tuple[When, list[str]]:
    """The longest leading run of `words` that is a time phrase, and the words after it."""
    error: WhenError | None = None
    for end in range(min(len(words), MAX_WHEN_WORDS), 0, -1):
        try:
            return parse_when(" ".join(words[:end]), now, zone), words[end:]
        except WhenError as exc:
            error = exc  # the shortest attempt's complaint is the useful one
    raise error or WhenError(f"When? Say it like: {WHEN_FORMS}")
