"""Deterministic distillation: transcript lines since the watermark → MEMORY.md and daily notes.

One run, under the scope's lock: read from the watermark, turn each line into fact, forget
or note operations (memory.rules), redact, write MEMORY.md and the day files atomically,
and only then move the watermark. A crash before the watermark moves repeats the run, and
a repeat changes nothing: facts are deduplicated and a note line already there is skipped.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date

from memory import daily, facts
from memory.redact import redact
from memory.rules import Durable, Forget, Note, classify
from memory.scope_files import ScopeFiles
from memory.state import JobStates
from memory.when import absolute_dates, day_of, hhmm
from transcripts import TranscriptLine, TranscriptStore
from transcripts.lines import FROM_HALO, Message

Names = Callable[[str | None], str]
"""A speaker label (member id, "halo", "unknown:…") → the name memory files use."""
MayWrite = Callable[[str | None, str], bool]
"""May this speaker's words be written to this scope's memory? (the policy's write_memory)"""

NOTE_CHARS = 500


@dataclass(frozen=True, slots=True)
class DistillResult:
    scope_id: str
    from_offset: int
    to_offset: int
    items: int  # transcript lines read
    facts_added: int = 0
    facts_superseded: int = 0
    facts_forgotten: int = 0
    notes_added: int = 0
    skipped: int = 0  # lines the policy did not let into memory


@dataclass(frozen=True, slots=True)
class _AddFact:
    body: str
    meta: str
    day: date
    subject: str | None = None
    key: str | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True)
class _Forget:
    query: str
    only_of: str | None


@dataclass(slots=True)
class Plan:
    """What a batch of transcript lines asks of a scope's memory, in order."""

    fact_ops: list[_AddFact | _Forget] = field(default_factory=list)
    notes: dict[date, list[str]] = field(default_factory=lambda: defaultdict(list))
    forgets: list[_Forget] = field(default_factory=list)
    skipped: int = 0


def plan(lines: Iterable[TranscriptLine], scope_id: str, names: Names, may_write: MayWrite) -> Plan:
    """Classify lines. Commands acted when they were sent and are skipped here; an assistant
    reply is noted (shortened) only when the message it answers was noted."""
    out = Plan()
    answered = False
    for line in lines:
        if isinstance(line, Message):
            answered = False
            if line.text.lstrip().startswith("/"):
                continue
            if not line.for_memory or not may_write(line.speaker, scope_id):
                out.skipped += 1
                continue
            answered = _plan_user_line(out, line, names(line.speaker))
        elif isinstance(line, FROM_HALO):
            if answered and line.text.strip():
                day = day_of(line.ts)
                text = daily.shorten_reply(absolute_dates(redact(line.text), day))
                out.notes[day].append(daily.note_line(hhmm(line.ts), names(line.speaker), text))
            answered = False
    return out


def _plan_user_line(out: Plan, line: TranscriptLine, name: str) -> bool:
    day = day_of(line.ts)
    meta = f"{name}, {day.isoformat()}"
    noted = False
    said_to_others = isinstance(line, Message) and line.unaddressed
    for action in classify(redact(line.text)):
        if said_to_others and isinstance(action, Durable) and action.key is None:
            # "remember, just do it" in a group, to the others: an instruction only when said to halo
            action = Note(redact(line.text))
        if isinstance(action, Durable):
            if action.key is not None and action.value is not None:
                value = absolute_dates(action.value, day)
                body = facts.render_keyed(name, action.key, value)
                out.fact_ops.append(_AddFact(body, meta, day, name, action.key, value))
            else:
                out.fact_ops.append(_AddFact(absolute_dates(action.text, day), meta, day))
        elif isinstance(action, Forget):
            forget = _Forget(action.query, name if action.mine else None)
            out.fact_ops.append(forget)
            out.forgets.append(forget)
            for notes in out.notes.values():  # notes of this batch said before the forget
                notes[:] = [n for n in notes if not daily.matches(n, forget.query, forget.only_of)]
        elif isinstance(action, Note):
            text = daily.one_line(absolute_dates(action.text, day), NOTE_CHARS)
            out.notes[day].append(daily.note_line(hhmm(line.ts), name, text))
            noted = True
    return noted


class Distiller:
    """Runs `plan` for a scope from its watermark and writes the result. Blocking: use a thread."""

    def __init__(
        self,
        files: ScopeFiles,
        transcripts: TranscriptStore,
        state: JobStates,
        *,
        names: Names,
        may_write: MayWrite,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.files = files
        self.transcripts = transcripts
        self.state = state
        self.names = names
        self.may_write = may_write
        self.clock = clock

    def run(self, scope_id: str) -> DistillResult:
        with self.files.lock(scope_id):
            self.files.ensure(scope_id)
            state = self.state.get(scope_id, "distill")
            reader = self.transcripts.read_from(scope_id, state.offset)
            lines = [line for _, line in reader]
            end = reader.next_offset
            todo = plan(lines, scope_id, self.names, self.may_write)
            counts = self._write_facts(scope_id, todo.fact_ops)
            for forget in todo.forgets:
                self.files.forget_in_daily(scope_id, forget.query, forget.only_of)
            notes = 0
            for day, day_lines in sorted(todo.notes.items()):
                self.files.add_daily(scope_id, day, daily.NOTES, day_lines, dedupe=True)
                notes += len(day_lines)
            self.state.put(state.succeeded(self.clock(), end, len(lines)))
        return DistillResult(scope_id, state.offset, end, len(lines), *counts, notes, todo.skipped)

    def _write_facts(self, scope_id: str, ops: list[_AddFact | _Forget]) -> tuple[int, int, int]:
        if not ops:
            return 0, 0, 0
        header = self.files.memory_header(scope_id)
        counts = [0, 0, 0]

        def change(text: str) -> str:
            counts[:] = [0, 0, 0]  # the change may be redone on a hand-edited file
            for op in ops:
                if isinstance(op, _Forget):
                    text, removed = facts.forget(text, op.query, op.only_of)
                    counts[2] += removed
                    continue
                text, added = facts.add_fact(
                    text,
                    op.body,
                    op.meta,
                    header=header,
                    subject=op.subject,
                    key=op.key,
                    value=op.value,
                    day=op.day,
                )
                counts[0] += added.added
                counts[1] += added.superseded
            return text

        self.files.update_memory(scope_id, change)
        return counts[0], counts[1], counts[2]
