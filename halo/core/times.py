"""One way halo writes a date and a time for people, in the family's time zone.

The dashboard, chat replies, `/reminders` and the web chat all say "Sat 28 Nov, 17:00" (the
year only when it is not this year). The dashboard's script has the same format in its `when`
function; tests/admin/test_dashboard.py checks the two agree.
"""

from __future__ import annotations

from datetime import date, datetime, tzinfo
from zoneinfo import ZoneInfo

from config.family import Family

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def family_zone(family: Family) -> ZoneInfo:
    return ZoneInfo(family.family.timezone)


def say_day(day: date, this_year: int | None = None) -> str:
    """ "Sat 28 Nov" ("Sat 28 Nov 2027" when `this_year` is another year)."""
    year = "" if this_year in (None, day.year) else f" {day.year}"
    return f"{_WEEKDAYS[day.weekday()]} {day.day} {_MONTHS[day.month - 1]}{year}"


def say_time(at: datetime, zone: tzinfo, now: datetime | None = None) -> str:
    """ "Sat 28 Nov, 17:00" in `zone`; the year too when `at` is not in `now`'s year there."""
    local = at.astimezone(zone)
    this_year = now.astimezone(zone).year if now is not None else local.year
    return f"{say_day(local.date(), this_year)}, {local:%H:%M}"
