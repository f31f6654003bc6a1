"""The reminder time parser on every form the issue names, in the family's zone and across
daylight-saving changes (Europe/London, America/New_York)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from halo.reminders.when import Recurrence, WhenError, describe, parse_when, split_when

LONDON = ZoneInfo("Europe/London")
NEW_YORK = ZoneInfo("America/New_York")


def local(zone: ZoneInfo, *parts: int) -> datetime:
    return datetime(*parts, tzinfo=zone)  # type: ignore[misc]


# Tuesday 14 January 2025, 10:00 in London (GMT: local == UTC)
NOW = local(LONDON, 2025, 1, 14, 10, 0)


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("in 20m", local(LONDON, 2025, 1, 14, 10, 20)),
        ("in 2h", local(LONDON, 2025, 1, 14, 12, 0)),
        ("in 1h 30m", local(LONDON, 2025, 1, 14, 11, 30)),
        ("in 2 hours", local(LONDON, 2025, 1, 14, 12, 0)),
        ("at 18:30", local(LONDON, 2025, 1, 14, 18, 30)),
        ("at 9:00", local(LONDON, 2025, 1, 15, 9, 0)),  # passed today: tomorrow
        ("at 7pm", local(LONDON, 2025, 1, 14, 19, 0)),
        ("tomorrow 7:30", local(LONDON, 2025, 1, 15, 7, 30)),
        ("at 7 tomorrow", local(LONDON, 2025, 1, 15, 7, 0)),
        ("mon 9:00", local(LONDON, 2025, 1, 20, 9, 0)),
        ("tue 11:00", local(LONDON, 2025, 1, 14, 11, 0)),  # later today
        ("tue 9:00", local(LONDON, 2025, 1, 21, 9, 0)),  # passed today: next week
        ("friday at 16:15", local(LONDON, 2025, 1, 17, 16, 15)),
    ],
)
def test_one_off_forms(phrase: str, expected: datetime) -> None:
    when = parse_when(phrase, NOW, LONDON)
    assert when.first == expected.astimezone(UTC)
    assert when.every is None


@pytest.mark.parametrize(
    ("phrase", "first", "rule"),
    [
        ("every weekday 7:30", local(LONDON, 2025, 1, 15, 7, 30), "mon-fri 07:30"),
        ("every day 20:00", local(LONDON, 2025, 1, 14, 20, 0), "* 20:00"),
        ("every sunday 18:00", local(LONDON, 2025, 1, 19, 18, 0), "sun 18:00"),
    ],
)
def test_recurring_forms(phrase: str, first: datetime, rule: str) -> None:
    when = parse_when(phrase, NOW, LONDON)
    assert when.first == first.astimezone(UTC)
    assert str(when.every) == rule
    assert Recurrence.parse(rule) == when.every


def test_every_weekday_skips_the_weekend() -> None:
    rule = Recurrence.parse("mon-fri 07:30")
    friday = local(LONDON, 2025, 1, 17, 7, 30)
    assert rule.next_after(friday, LONDON) == local(LONDON, 2025, 1, 20, 7, 30).astimezone(UTC)


@pytest.mark.parametrize(
    "phrase", ["", "soon", "in", "in 0m", "in 20 parsecs", "at 25:00", "every 7:30", "every fortnight 9:00", "tomorrow"]
)
def test_nonsense_is_refused_with_the_forms(phrase: str) -> None:
    with pytest.raises(WhenError):
        parse_when(phrase, NOW, LONDON)


def test_split_takes_the_time_and_leaves_the_text() -> None:
    when, rest = split_when(["at", "7", "tomorrow", "to", "pack", "his", "kit"], NOW, LONDON)
    assert when.first == local(LONDON, 2025, 1, 15, 7, 0).astimezone(UTC)
    assert rest == ["to", "pack", "his", "kit"]
    when, rest = split_when(["in", "20m", "take", "the", "bread", "out"], NOW, LONDON)
    assert rest == ["take", "the", "bread", "out"]


def test_describe_says_the_local_day_and_time() -> None:
    when = parse_when("mon 9:00", NOW, LONDON)
    assert describe(when.first, LONDON, NOW) == "Mon 20 Jan, 09:00"  # halo's one format (halo/core/times.py)
    assert describe(local(LONDON, 2026, 1, 5, 18, 30), LONDON, NOW) == "Mon 5 Jan 2026, 18:30"


# --- daylight saving ---------------------------------------------------------------------


def test_london_spring_forward_keeps_the_wall_clock() -> None:
    """Clocks go forward on Sunday 30 March 2025: 07:30 is 07:30 UTC before, 06:30 UTC after."""
    saturday = local(LONDON, 2025, 3, 29, 7, 30)
    rule = Recurrence.parse("* 07:30")
    sunday = rule.next_after(saturday, LONDON)
    assert sunday == datetime(2025, 3, 30, 6, 30, tzinfo=UTC)
    assert sunday.astimezone(LONDON).hour == 7


def test_london_tomorrow_across_the_change() -> None:
    now = local(LONDON, 2025, 3, 29, 22, 0)  # GMT
    assert parse_when("tomorrow 7:30", now, LONDON).first == datetime(2025, 3, 30, 6, 30, tzinfo=UTC)


def test_london_in_2h_across_the_gap_is_two_real_hours() -> None:
    now = datetime(2025, 3, 30, 0, 30, tzinfo=UTC)  # 00:30 GMT, the clocks jump at 01:00
    first = parse_when("in 2h", now, LONDON).first
    assert first == datetime(2025, 3, 30, 2, 30, tzinfo=UTC)
    assert first.astimezone(LONDON).hour == 3  # 03:30 BST


def test_london_a_time_the_spring_gap_skips_still_fires() -> None:
    now = local(LONDON, 2025, 3, 29, 12, 0)
    first = parse_when("tomorrow 1:30", now, LONDON).first  # 01:30 does not exist that night
    assert datetime(2025, 3, 30, 1, 0, tzinfo=UTC) <= first <= datetime(2025, 3, 30, 2, 0, tzinfo=UTC)


def test_new_york_fall_back_fires_a_repeated_time_once() -> None:
    """1:30 happens twice on Sunday 2 November 2025 in New York: one reminder, not two."""
    rule = Recurrence.parse("* 01:30")
    saturday = local(NEW_YORK, 2025, 11, 1, 1, 30)
    sunday = rule.next_after(saturday, NEW_YORK)
    monday = rule.next_after(sunday, NEW_YORK)
    assert sunday.astimezone(NEW_YORK).date().day == 2
    assert monday.astimezone(NEW_YORK).date().day == 3
    assert monday.astimezone(NEW_YORK).hour == 1


def test_new_york_every_weekday_after_fall_back_keeps_the_wall_clock() -> None:
    friday = local(NEW_YORK, 2025, 10, 31, 7, 30)  # EDT, UTC-4
    monday = Recurrence.parse("mon-fri 07:30").next_after(friday, NEW_YORK)
    assert monday == datetime(2025, 11, 3, 12, 30, tzinfo=UTC)  # EST, UTC-5


def test_new_york_spring_forward_at_18_00() -> None:
    saturday = local(NEW_YORK, 2025, 3, 8, 18, 0)  # EST
    sunday = parse_when("every sunday 18:00", saturday, NEW_YORK).first
    assert sunday == datetime(2025, 3, 9, 22, 0, tzinfo=UTC)  # EDT, UTC-4
