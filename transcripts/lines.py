"""Transcript lines: one type per kind of line, and the one place a line becomes JSON and back.

A line is one JSON object: the keys every line has (`id`, `ts`, `scope_id`, `role`, `speaker`,
`target`, `platform`, `text`), then its kind's own keys, each written only when it says something.
The kinds, and what tells a stored line to be one:

- `Message` (user): model_input, unaddressed, message_id, `Received`, `SafetyMarks`
- `Reply` (assistant): reply, answers, restart, `LevelMarks`, `SafetyMarks`
- `Notice` (assistant, with outbox_id): outbox_id, kind (the outbox's: notice, reminder, …)
- `Alert` (event, with outbox_id): outbox_id, kind (`alert`)
- `ModelItem` (event, kind `session.item`): item
- `SessionStart` (event, kind `session.start`): keep_from, summary
- `Pop` (event, kind `session.pop`)
- `Closing` (event, with answers): answers, reply (`silent`), `LevelMarks`, `SafetyMarks`
- `Note` (any other event: the safety screen's note), `SystemNote` (system: halo writes none)

A key its kind does not know, or a known key holding a value not of its type, is kept in
`unknown` and written back as it was: a line another version of halo wrote reads, and is
written again (`halo storage migrate`), unchanged. Nothing outside this module reads a line's
keys by name.
"""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, get_args

from transcripts.text import clean_text, clean_value

Role = Literal["user", "assistant", "system", "event"]
ROLES: frozenset[str] = frozenset(get_args(Role))
CORE_KEYS: frozenset[str] = frozenset({"id", "ts", "scope_id", "role", "speaker", "target", "platform", "text"})

START = "session.start"
ITEM = "session.item"
POP = "session.pop"

_ValueKind = Literal["str", "true", "int", "dict"]


@dataclass(frozen=True, slots=True)
class _Key:
    """One of a kind's own keys: its name in JSON, its attribute, and the values it takes
    (`true`: only True, written only when True; the others written unless None)."""

    key: str
    attr: str
    kind: _ValueKind = "str"

    def accepts(self, value: Any) -> bool:
        if self.kind == "str":
            return isinstance(value, str)
        if self.kind == "true":
            return value is True
        if self.kind == "int":
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, dict)

    def said(self, value: Any) -> bool:
        return value is True if self.kind == "true" else value is not None


def _take(keys: tuple[_Key, ...], rest: dict[str, Any]) -> dict[str, Any]:
    """The attributes `keys` find in `rest`, each taken out of it."""
    found: dict[str, Any] = {}
    for k in keys:
        if k.key in rest and k.accepts(rest[k.key]):
            found[k.attr] = rest.pop(k.key)
    return found


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a type does with its keys, worked out once (a line is made on every turn)."""

    texts: tuple[str, ...]  # str attributes, repaired on the way in
    values: tuple[str, ...]  # dict attributes, repaired on the way in
    writes: tuple[tuple[str | None, str, str, bool], ...]  # (group attribute, key, attribute, only True)

    @staticmethod
    def of(keys: tuple[_Key, ...], groups: tuple[tuple[str, type[_Marks]], ...] = ()) -> _Plan:
        writes: list[tuple[str | None, str, str, bool]] = [(None, k.key, k.attr, k.kind == "true") for k in keys]
        for attr, marks in groups:
            writes += [(attr, k.key, k.attr, k.kind == "true") for k in marks.KEYS]
        return _Plan(
            tuple(k.attr for k in keys if k.kind == "str"),
            tuple(k.attr for k in keys if k.kind == "dict"),
            tuple(writes),
        )

    def clean(self, target: object) -> None:
        """What cannot be encoded is repaired, on the way in and on reading an old line back."""
        for attr in self.texts:
            value = getattr(target, attr)
            if value is not None and not value.isascii() and (cleaned := clean_text(value)) is not value:
                object.__setattr__(target, attr, cleaned)
        for attr in self.values:
            if value := getattr(target, attr):
                object.__setattr__(target, attr, clean_value(value))

    def write(self, source: object, out: dict[str, Any]) -> None:
        for group, key, attr, only_true in self.writes:
            value = getattr(getattr(source, group) if group is not None else source, attr)
            if value is True if only_true else value is not None:
                out[key] = value


_PLANS: dict[type, _Plan] = {}


def _plan(cls: type[TranscriptLine] | type[_Marks]) -> _Plan:
    if (plan := _PLANS.get(cls)) is None:
        if issubclass(cls, _Marks):
            plan = _Plan.of(cls.KEYS)
        else:
            keys = tuple(p for p in cls.PARTS if isinstance(p, _Key))
            plan = _Plan.of(keys, tuple(p for p in cls.PARTS if not isinstance(p, _Key)))
        _PLANS[cls] = plan
    return plan


class _Marks:
    """A group of keys several kinds share, written flat among the line's keys."""

    __slots__ = ()
    KEYS: ClassVar[tuple[_Key, ...]]

    def __post_init__(self) -> None:
        _plan(type(self)).clean(self)

    def __bool__(self) -> bool:
        return any(k.said(getattr(self, k.attr)) for k in self.KEYS)


@dataclass(frozen=True, slots=True)
class Received(_Marks):
    """What intake made of what came with a person's message (halo/pipeline/intake.py)."""

    heard: bool = False  # the text was transcribed from a voice note
    voice: str | None = None  # a voice note that was not: "not transcribed"
    photo: str | None = None  # "shown" to the model, or "not shown"
    document: str | None = None  # "not read"

    KEYS: ClassVar[tuple[_Key, ...]] = (
        _Key("heard", "heard", "true"),
        _Key("voice", "voice"),
        _Key("photo", "photo"),
        _Key("document", "document"),
    )


@dataclass(frozen=True, slots=True)
class LevelMarks(_Marks):
    """The model level a message was answered at (halo/routing/levels.py), and why."""

    level: str | None = None  # "L0" … "L3"
    reason: str | None = None
    wanted: str | None = None  # what it asked for, when a cap brought it down

    KEYS: ClassVar[tuple[_Key, ...]] = (
        _Key("level", "level"),
        _Key("level_reason", "reason"),
        _Key("level_wanted", "wanted"),
    )


@dataclass(frozen=True, slots=True)
class SafetyMarks(_Marks):
    """The child-safety screen's verdict (halo/safety/gate.py): on the message when it is
    written, and on the line that answers it with what halo did."""

    risk: str | None = None
    risk_category: str | None = None
    risk_topic: str | None = None
    risk_source: str | None = None
    safety_action: str | None = None
    output_risk: str | None = None
    output_action: str | None = None
    not_for_memory: bool = False  # a child's flagged words: memory leaves the line out

    KEYS: ClassVar[tuple[_Key, ...]] = (
        _Key("risk", "risk"),
        _Key("risk_category", "risk_category"),
        _Key("risk_topic", "risk_topic"),
        _Key("risk_source", "risk_source"),
        _Key("safety_action", "safety_action"),
        _Key("output_risk", "output_risk"),
        _Key("output_action", "output_action"),
        _Key("not_for_memory", "not_for_memory", "true"),
    )


_Part = _Key | tuple[str, type[_Marks]]  # a key, or (attribute, group of keys)


@dataclass(frozen=True, slots=True)
class TranscriptLine:
    """What every line has. A line is always one of the kinds below (`parse` picks it)."""

    id: str
    ts: datetime
    scope_id: str
    text: str
    _: KW_ONLY
    speaker: str | None = None
    target: str | None = None
    platform: str | None = None
    unknown: dict[str, Any] = field(default_factory=dict, hash=False)  # keys no kind knows, as read

    role: ClassVar[Role]
    KIND: ClassVar[str | None] = None  # the `kind` key that tells a session event
    PARTS: ClassVar[tuple[_Part, ...]] = ()

    def __post_init__(self) -> None:
        if type(self) is TranscriptLine:
            raise TypeError("a transcript line is one of the kinds in transcripts/lines.py, not the base")
        if self.ts.tzinfo is None:
            raise ValueError("a transcript line's ts must be timezone-aware")
        if self.ts.utcoffset():
            object.__setattr__(self, "ts", self.ts.astimezone(UTC))
        for name in ("id", "text", "speaker", "target", "platform"):
            value = getattr(self, name)
            if isinstance(value, str) and (cleaned := clean_text(value)) is not value:
                object.__setattr__(self, name, cleaned)
        _plan(type(self)).clean(self)
        if self.unknown:
            if clash := CORE_KEYS & self.unknown.keys():
                raise ValueError(f"unknown keys must not shadow core keys: {sorted(clash)}")
            object.__setattr__(self, "unknown", clean_value(self.unknown))

    @property
    def for_memory(self) -> bool:
        """False for a line the safety screen marked `not_for_memory` (a child's flagged words):
        distillation, extraction and graph memory leave it out."""
        return True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "ts": self.ts.isoformat(),
            "scope_id": self.scope_id,
            "role": self.role,
            "speaker": self.speaker,
            "target": self.target,
            "platform": self.platform,
            "text": self.text,
        }
        if self.KIND is not None:
            out["kind"] = self.KIND
        _plan(type(self)).write(self, out)
        for key, value in self.unknown.items():
            out.setdefault(key, value)
        return out

    def to_json(self) -> str:
        """One line of JSON, no newline; non-ASCII stays readable (not every family writes English)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TranscriptLine:
        return parse(data)

    @staticmethod
    def from_json(raw: str | bytes) -> TranscriptLine:
        return parse_json(raw)


def _screened(marks: SafetyMarks) -> bool:
    return not marks.not_for_memory


@dataclass(frozen=True, slots=True, kw_only=True)
class Message(TranscriptLine):
    """A person's message. `model_input`: what the model is shown when it is not `text` (who
    said it, in a group); `unaddressed`: kept, not for halo to answer (even after a crash)."""

    model_input: str | None = None
    unaddressed: bool = False
    message_id: str | None = None  # the chat app's id of the message
    received: Received = Received()
    safety: SafetyMarks = SafetyMarks()

    role: ClassVar[Literal["user"]] = "user"
    PARTS: ClassVar[tuple[_Part, ...]] = (
        _Key("model_input", "model_input"),
        _Key("unaddressed", "unaddressed", "true"),
        _Key("message_id", "message_id"),
        ("received", Received),
        ("safety", SafetyMarks),
    )

    @property
    def for_memory(self) -> bool:
        return _screened(self.safety)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply(TranscriptLine):
    """What the person got back. `reply`: how it was made (`model`, or halo's own: `command`,
    `no_model`); `answers`: the message it closes; `restart`: an apology after a crash."""

    reply: str | None = None
    answers: str | None = None
    restart: str | None = None
    level: LevelMarks = LevelMarks()
    safety: SafetyMarks = SafetyMarks()

    role: ClassVar[Literal["assistant"]] = "assistant"
    PARTS: ClassVar[tuple[_Part, ...]] = (
        _Key("reply", "reply"),
        _Key("answers", "answers"),
        _Key("restart", "restart"),
        ("level", LevelMarks),
        ("safety", SafetyMarks),
    )

    @property
    def for_memory(self) -> bool:
        return _screened(self.safety)


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice(TranscriptLine):
    """What halo said on its own through the outbox (a reminder, a notice): `outbox_id` is the
    message's id in the outbox and the web inbox, `kind` the outbox's kind."""

    outbox_id: str
    kind: str | None = None

    role: ClassVar[Literal["assistant"]] = "assistant"
    PARTS: ClassVar[tuple[_Part, ...]] = (_Key("outbox_id", "outbox_id"), _Key("kind", "kind"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Alert(TranscriptLine):
    """A safety alert the outbox sent a parent: an event, not part of the model's history."""

    outbox_id: str
    kind: str | None = "alert"

    role: ClassVar[Literal["event"]] = "event"
    PARTS: ClassVar[tuple[_Part, ...]] = (_Key("outbox_id", "outbox_id"), _Key("kind", "kind"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelItem(TranscriptLine):
    """One model item of a run (a tool call, its output, reasoning), as the Agents SDK gave it."""

    item: dict[str, Any] = field(default_factory=dict, hash=False)

    role: ClassVar[Literal["event"]] = "event"
    KIND: ClassVar[str | None] = ITEM
    PARTS: ClassVar[tuple[_Part, ...]] = (_Key("item", "item", "dict"),)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStart(TranscriptLine):
    """The session starts again here (`/new`, a clear, a compaction). A compaction keeps the
    lines from byte offset `keep_from` on, after a `summary` of the older ones."""

    keep_from: int | None = None
    summary: str | None = None

    role: ClassVar[Literal["event"]] = "event"
    KIND: ClassVar[str | None] = START
    PARTS: ClassVar[tuple[_Part, ...]] = (_Key("keep_from", "keep_from", "int"), _Key("summary", "summary"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Pop(TranscriptLine):
    """The session's last item taken back (the SDK's `pop_item`)."""

    role: ClassVar[Literal["event"]] = "event"
    KIND: ClassVar[str | None] = POP


@dataclass(frozen=True, slots=True, kw_only=True)
class Closing(TranscriptLine):
    """Closes a message (`answers`) no reply was made for: the model unavailable, its budget
    spent, or nothing to say (`reply`: `silent` when it stays out of the model's history)."""

    answers: str | None = None
    reply: str | None = None
    level: LevelMarks = LevelMarks()
    safety: SafetyMarks = SafetyMarks()

    role: ClassVar[Literal["event"]] = "event"
    PARTS: ClassVar[tuple[_Part, ...]] = (
        _Key("answers", "answers"),
        _Key("reply", "reply"),
        ("level", LevelMarks),
        ("safety", SafetyMarks),
    )

    @property
    def for_memory(self) -> bool:
        return _screened(self.safety)


@dataclass(frozen=True, slots=True, kw_only=True)
class Note(TranscriptLine):
    """Anything else halo notes in a transcript (the safety screen's note that parents were told)."""

    role: ClassVar[Role] = "event"


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemNote(Note):
    """A `system` line: halo writes none, but a transcript may hold one."""

    role: ClassVar[Role] = "system"


FROM_HALO = (Reply, Notice)  # what a person got from halo: `isinstance(line, FROM_HALO)`

_SESSION_KINDS: dict[str, type[TranscriptLine]] = {START: SessionStart, ITEM: ModelItem, POP: Pop}
_STRINGS = ("id", "scope_id", "text")


def _kind_of(role: str, rest: dict[str, Any]) -> type[TranscriptLine]:
    if role == "user":
        return Message
    if role == "assistant":
        return Notice if isinstance(rest.get("outbox_id"), str) else Reply
    if role == "system":
        return SystemNote
    if role != "event":
        raise ValueError(f"a transcript line's role must be one of {sorted(ROLES)}, not {role!r}")
    kind = rest.get("kind")
    session = _SESSION_KINDS.get(kind) if isinstance(kind, str) else None
    if session is not None and (session is not ModelItem or isinstance(rest.get("item"), dict)):
        return session
    if isinstance(rest.get("outbox_id"), str):
        return Alert
    if "answers" in rest:
        return Closing
    return Note


def parse(data: dict[str, Any]) -> TranscriptLine:
    """The line `data` holds, as its kind. Raises ValueError (or KeyError/TypeError) on a record
    that is not a transcript line."""
    if not all(isinstance(data[key], str) for key in _STRINGS):
        raise ValueError("id, scope_id and text must be strings")
    ts = datetime.fromisoformat(data["ts"])
    if ts.tzinfo is None:  # written by something else: UTC is the only thing halo writes
        ts = ts.replace(tzinfo=UTC)
    rest = {k: v for k, v in data.items() if k not in CORE_KEYS}
    cls = _kind_of(data["role"], rest)
    if cls.KIND is not None:
        del rest["kind"]
    fields: dict[str, Any] = {}
    for part in cls.PARTS:
        if isinstance(part, _Key):
            fields.update(_take((part,), rest))
        elif found := _take(part[1].KEYS, rest):
            fields[part[0]] = part[1](**found)
    return cls(
        data["id"],
        ts,
        data["scope_id"],
        data["text"],
        speaker=data.get("speaker"),
        target=data.get("target"),
        platform=data.get("platform"),
        unknown=rest,
        **fields,
    )


def parse_json(raw: str | bytes) -> TranscriptLine:
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("a transcript line must be a JSON object")
    return parse(data)
