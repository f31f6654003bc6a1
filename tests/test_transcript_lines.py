"""Transcript lines (transcripts/lines.py): each kind read back as itself, the format as halo has
always written it, and a line another version wrote kept as it was. Pure: no store, no halo."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from transcripts.lines import (
    Alert,
    Closing,
    LevelMarks,
    Message,
    ModelItem,
    Note,
    Notice,
    Pop,
    Received,
    Reply,
    SafetyMarks,
    SessionStart,
    SystemNote,
    TranscriptLine,
    parse,
    parse_json,
)

T0 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
SCOPE = "telegram:1002"


def record(role: str, text: str = "x", **keys: object) -> dict[str, object]:
    core = {"id": "1", "ts": T0.isoformat(), "scope_id": SCOPE, "role": role}
    return {**core, "speaker": None, "target": None, "platform": "telegram", "text": text, **keys}


EVERY_KIND: list[TranscriptLine] = [
    Message(
        "1",
        T0,
        SCOPE,
        "(voice note) pick up milk",
        speaker="mom",
        model_input="[Mom] pick up milk",
        unaddressed=True,
        message_id="77",
        received=Received(heard=True, photo="not shown", document="not read"),
        safety=SafetyMarks(risk="medium", risk_category="personal_data", not_for_memory=True),
    ),
    Reply(
        "2",
        T0,
        SCOPE,
        "Done.",
        speaker="halo",
        reply="model",
        answers="1",
        level=LevelMarks("L1", "small talk", "L3"),
        safety=SafetyMarks(risk="low", risk_source="floor", safety_action="pass", output_risk="low"),
    ),
    Reply("3", T0, SCOPE, "Sorry, I was restarted", reply="command", answers="1", restart="apology"),
    Notice("4", T0, SCOPE, "Dinner at seven.", outbox_id="o1", kind="reminder"),
    Alert("5", T0, SCOPE, "halo safety alert", outbox_id="o2"),
    ModelItem("6", T0, SCOPE, "model function_call: current_time", item={"type": "function_call", "name": "t"}),
    SessionStart("7", T0, SCOPE, "session compacted with a summary", keep_from=120, summary="They talked."),
    SessionStart("8", T0, SCOPE, "session cleared: /new"),
    Pop("9", T0, SCOPE, "session: last item taken back"),
    Closing("10", T0, SCOPE, "no reply needed", answers="1", reply="silent", level=LevelMarks("L0", "thanks")),
    Note("11", T0, SCOPE, "safety: medium risk; parents told: mom"),
    SystemNote("12", T0, SCOPE, "a system line"),
]


@pytest.mark.parametrize("line", EVERY_KIND, ids=lambda line: f"{type(line).__name__}-{line.id}")
def test_each_kind_reads_back_as_itself(line: TranscriptLine) -> None:
    again = parse_json(line.to_json())
    assert type(again) is type(line) and again == line
    assert list(json.loads(line.to_json()))[:8] == [
        "id",
        "ts",
        "scope_id",
        "role",
        "speaker",
        "target",
        "platform",
        "text",
    ]


def test_the_keys_are_the_ones_halo_has_always_written() -> None:
    written = [json.loads(line.to_json()) for line in EVERY_KIND]
    own = [
        {k: v for k, v in d.items() if k not in ("id", "ts", "scope_id", "speaker", "target", "platform", "text")}
        for d in written
    ]
    assert own[0] == {
        "role": "user",
        "model_input": "[Mom] pick up milk",
        "unaddressed": True,
        "message_id": "77",
        "heard": True,
        "photo": "not shown",
        "document": "not read",
        "risk": "medium",
        "risk_category": "personal_data",
        "not_for_memory": True,
    }
    assert list(own[1]) == [
        "role", "reply", "answers", "level", "level_reason", "level_wanted",
        "risk", "risk_source", "safety_action", "output_risk",
    ]  # fmt: skip
    assert own[3] == {"role": "assistant", "outbox_id": "o1", "kind": "reminder"}
    assert own[4] == {"role": "event", "outbox_id": "o2", "kind": "alert"}
    assert own[5] == {"role": "event", "kind": "session.item", "item": {"type": "function_call", "name": "t"}}
    assert own[6] == {"role": "event", "kind": "session.start", "keep_from": 120, "summary": "They talked."}
    assert own[7] == {"role": "event", "kind": "session.start"}
    assert own[8] == {"role": "event", "kind": "session.pop"}
    assert list(own[9]) == ["role", "answers", "reply", "level", "level_reason"]
    assert own[10] == {"role": "event"}


def test_what_a_kind_does_not_know_is_kept_as_it_was_read() -> None:
    """Another version's keys, and a known key holding what this version would not write
    there: read, not taken for the field, and written back unchanged."""
    odd = [
        record("user", unaddressed="yes", message_id=12, reply_to="abc", tokens=3),
        record("assistant", reply=["model"], answers="1", level="L9", extra_level={"a": 1}),
        record("event", kind="session.item", item="not an item"),
        record("event", kind="session.start", keep_from="120", summary=None),
        record("event", kind="session.later"),
        record("event", outbox_id=5, kind="alert"),
    ]
    lines = [parse(dict(d)) for d in odd]
    assert [type(line) for line in lines] == [Message, Reply, Note, SessionStart, Note, Note]
    assert [line.to_dict() for line in lines] == odd
    message, reply, _, start, _, _ = lines
    assert isinstance(message, Message) and (message.unaddressed, message.message_id) == (False, None)
    assert isinstance(reply, Reply) and (reply.reply, reply.answers, reply.level.level) == (None, "1", "L9")
    assert isinstance(start, SessionStart) and start.keep_from is None


def test_what_cannot_be_encoded_is_repaired_in_every_field() -> None:
    broken = "a \ud800 b"
    lines = [
        Message("1", T0, SCOPE, broken, model_input=broken, unknown={"note": [broken]}),
        SessionStart("2", T0, SCOPE, "s", summary=broken),
        ModelItem("3", T0, SCOPE, "i", item={"content": broken}),
        parse(record("assistant", text=broken, level_reason=broken)),
    ]
    for line in lines:
        assert "\ud800" not in line.to_json() and "\ufffd" in line.to_json()
        line.to_json().encode("utf-8")


def test_a_line_without_a_known_role_or_its_strings_is_refused() -> None:
    with pytest.raises(ValueError):
        parse(record("bot"))
    with pytest.raises(ValueError):
        parse({**record("user"), "text": 3})
    with pytest.raises(ValueError):
        Message("1", datetime(2026, 1, 1), SCOPE, "naive")
    with pytest.raises(TypeError):
        TranscriptLine("1", T0, SCOPE, "which kind?")
    assert parse({**record("user"), "ts": "2026-01-01T10:00:00"}).ts == datetime(2026, 1, 1, 10, tzinfo=UTC)


def test_only_the_safety_screen_keeps_a_line_from_memory() -> None:
    kept_out = SafetyMarks(risk="medium", not_for_memory=True)
    assert not Message("1", T0, SCOPE, "x", safety=kept_out).for_memory
    assert not Reply("2", T0, SCOPE, "y", safety=kept_out).for_memory
    assert Message("3", T0, SCOPE, "z", safety=SafetyMarks(risk="low")).for_memory
    assert Note("4", T0, SCOPE, "n").for_memory
