"""The pure parts of memory: rules, redaction, absolute dates, MEMORY.md and daily-file text."""

from __future__ import annotations

from datetime import date

import pytest

from memory import daily, facts
from memory.markdown import append_to_section, section_body
from memory.redact import REDACTED, redact
from memory.rules import Durable, Forget, Note, classify
from memory.when import absolute_dates

RULES = [
    ("remember my shoe size is 38", [Durable("my shoe size is 38", "shoe size", "38")]),
    ("Remember that the spare key is under the blue pot.", [Durable("The spare key is under the blue pot")]),
    ("note: soccer is on Tuesdays", [Durable("Soccer is on Tuesdays")]),
    ("note to self: buy stamps", [Durable("Buy stamps")]),
    ("remember to water the plants", [Durable("Remember to water the plants")]),
    ("my favourite colour is green", [Durable("my favourite colour is green", "favourite colour", "green")]),
    ("My shoe size is 38.", [Durable("my shoe size is 38", "shoe size", "38")]),
    ("btw my height is 1.65 m", [Durable("my height is 1.65 m", "height", "1.65 m")]),
    ("Priya is my manager", [Durable("my manager is Priya", "manager", "Priya")]),
    (
        "Hi! My shoe size is 38. Can you find sneakers?",
        [Durable("my shoe size is 38", "shoe size", "38"), Note("Hi! Can you find sneakers?")],
    ),
    ("remember the vet is Dr. Okafor on Oak Road", [Durable("The vet is Dr. Okafor on Oak Road")]),
    ("note: J. Smith picks up Aarav at 5 p.m. on Fridays", [Durable("J. Smith picks up Aarav at 5 p.m. on Fridays")]),
    ("forget my shoe size", [Forget("my shoe size", mine=True)]),
    ("please forget about the dentist", [Forget("the dentist", mine=False)]),
    # not facts
    ("what is my shoe size?", [Note("what is my shoe size?")]),
    ("this is my favourite song", [Note("this is my favourite song")]),
    ("my meeting is tomorrow", [Note("my meeting is tomorrow")]),
    ("remember when we went to the lake", [Note("remember when we went to the lake")]),
    ("forget it", [Note("forget it")]),
    ("don't forget the milk", [Note("don't forget the milk")]),
    ("ok thanks", [Note("ok thanks")]),
    # said to someone else, kept only when "<name>'s X: Y" is a whole statement
    (
        "my favorite book is Harry Potter",
        [Durable("my favorite book is Harry Potter", "favorite book", "Harry Potter")],
    ),
    ("my team is like my second family too", [Note("my team is like my second family too")]),
    ("my favorite is painting landscapes", [Note("my favorite is painting landscapes")]),
    ("my kids are so excited about summer break", [Note("my kids are so excited about summer break")]),
    ("my true calling is I feel like this", [Note("my true calling is I feel like this")]),
    (
        "remember my family is always there for me",
        [Durable("my family is always there for me", "family", "always there for me")],
    ),
    ("Remember, I'm always here for you", [Note("Remember, I'm always here for you")]),
    ("/remember commands are handled elsewhere", []),
]


@pytest.mark.parametrize(("text", "expected"), RULES, ids=[t for t, _ in RULES])
def test_rule_table(text: str, expected: list) -> None:
    assert classify(text) == expected


def test_a_secret_is_never_a_fact_once_redacted() -> None:
    assert classify(redact("my password is hunter2")) == [Note(f"my password is {REDACTED}")]
    assert classify(redact("remember my pin is 4821")) == [Note(f"remember my pin is {REDACTED}")]


def test_dates_become_absolute() -> None:
    day = date(2026, 2, 13)
    assert absolute_dates("the dentist is tomorrow", day) == "the dentist is 2026-02-14"
    assert absolute_dates("Today we swam, yesterday we ran", day) == "2026-02-13 we swam, 2026-02-12 we ran"
    assert absolute_dates("pizza tonight", day) == "pizza the night of 2026-02-13"
    assert absolute_dates("this morning it rained", day) == "the morning of 2026-02-13 it rained"
    assert absolute_dates("todays", day) == "todays"


def test_keyed_fact_supersedes_and_the_old_line_is_marked_not_lost() -> None:
    text, first = facts.add_fact(
        "", "Mom's shoe size: 37", "Mom, 2026-02-10", header="# Memory\n", subject="Mom", key="shoe size", value="37"
    )
    text, second = facts.add_fact(
        text,
        "Mom's shoe size: 38",
        "Mom, 2026-02-13",
        subject="Mom",
        key="shoe size",
        value="38",
        day=date(2026, 2, 13),
    )
    assert first.added and second.added and second.superseded == 1
    assert "- ~~Mom's shoe size: 37~~ _(Mom, 2026-02-10; superseded 2026-02-13)_" in text
    assert "- Mom's shoe size: 38 _(Mom, 2026-02-13)_" in text
    assert [f.body for f in facts.live(text)] == ["Mom's shoe size: 38"]
    # the same value again changes nothing; another person's shoe size is another fact
    again, dup = facts.add_fact(
        text, "Mom's shoe size: 38", "Mom, 2026-02-14", subject="Mom", key="shoe size", value="38"
    )
    assert again == text and not dup.added
    text, other = facts.add_fact(
        text, "Wags's shoe size: 44", "Wags, 2026-02-14", subject="Wags", key="shoe size", value="44"
    )
    assert other.added and other.superseded == 0


def test_forget_removes_current_and_struck_lines_and_respects_whose() -> None:
    text = (
        "# Memory\n\n## Facts\n\n"
        "- ~~Mom's shoe size: 37~~ _(Mom, 2026-02-10; superseded 2026-02-13)_\n"
        "- Mom's shoe size: 38 _(Mom, 2026-02-13)_\n"
        "- Wags's shoe size: 44 _(Wags, 2026-02-13)_\n"
        "- The dentist is on Friday _(Mom, 2026-02-13)_\n"
    )
    mine, removed = facts.forget(text, "my shoe size", only_of="Mom")
    assert removed == 2 and "Mom's shoe size" not in mine and "Wags's shoe size: 44" in mine
    everyone, removed = facts.forget(text, "shoe size")
    assert removed == 3 and "The dentist" in everyone
    assert facts.forget(text, "the")[1] == 0  # stop words alone match nothing


def test_prompt_view_hides_struck_lines_and_comments() -> None:
    text = "# Memory\n\n<!-- for parents -->\n\n## Facts\n\n- ~~old~~ _(x; superseded 2026-01-01)_\n- new _(x)_\n"
    view = facts.prompt_view(text)
    assert "new" in view and "old" not in view and "for parents" not in view
    assert facts.prompt_view("# Memory\n\n<!-- nothing yet -->\n") == ""


def test_sections_keep_hand_edits_and_order() -> None:
    text = "# Title\n\nA parent's own paragraph.\n\n## Facts\n\n- one\n\n## Mine\n\n- kept\n"
    text = append_to_section(text, "Facts", ["- two"])
    text = append_to_section(text, "Shared", ["- shared"])
    assert text == (
        "# Title\n\nA parent's own paragraph.\n\n## Facts\n\n- one\n- two\n\n## Mine\n\n- kept\n\n"
        "## Shared\n\n- shared\n"
    )
    assert section_body(text, "facts") == "- one\n- two"


def test_daily_notes_skip_lines_already_there() -> None:
    header = daily.daily_header(date(2026, 2, 13), "web:mom")
    text = daily.add_lines("", daily.NOTES, ["- [10:00] Mom: hi"], header)
    assert daily.add_lines(text, daily.NOTES, ["- [10:00] Mom: hi"], header) == text
    assert daily.prompt_view(text, daily.NOTES) == "- [10:00] Mom: hi"
    assert daily.prompt_view(text, daily.TRANSCRIPT) == ""
    assert daily.shorten_reply("Sure. Anything else?") == "Sure."
