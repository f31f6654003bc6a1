"""The memory part of a turn's context: USER.md, the scope's MEMORY.md, today's and yesterday's notes.

A day's notes are what the scope said that day, so the ones from the time the model's history
starts on are left out: the history the model is sent carries those lines whole. Only what
fell out of the history (an earlier session, a compacted or trimmed part) is noted for it.

Every file is asked for through the policy (`read_memory`) before it is read, so what the
model sees is decided in code: the speaker's own USER.md, the target's only when the
policy allows it (a parent asking about a child: yes; a child about a parent: no), and
only this scope's memory. Each file is read from the memory's store on every turn (a stat
while a file is unchanged; on PostgreSQL what this process holds), so a parent's edit shows up
on the next turn; what is derived from a file is kept until the file changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import TYPE_CHECKING

from config.family import Member
from halo.context.builder import ContextSection, cut_oldest
from memory import daily, facts
from memory.markdown import tidy
from memory.store import MemoryStore, daily_md, memory_md, user_md
from memory.when import day_of, local
from transcripts.session import SentHistory

if TYPE_CHECKING:
    from halo.core.turn import Turn
    from halo.routing.plan import TurnPlan

USER_TOKENS = 800
MEMORY_TOKENS = 2500
DAILY_TOKENS = 1000
MAX_CACHED = 4096

# After PersonaSource (0, 1), in the fixed order.
PRIORITY_SPEAKER, PRIORITY_TARGET, PRIORITY_MEMORY, PRIORITY_TODAY, PRIORITY_YESTERDAY = 2, 3, 4, 5, 6
_NOTE_TIME = re.compile(r"- \[(\d\d:\d\d)\]")  # memory/daily.py's note and log lines


def notes_before(notes: str, day: date, sent: SentHistory | None) -> str:
    """A day's note lines the model's history does not hold: those before the minute its oldest
    line was written (that minute too, unless the history is the whole session). A line without
    a time (a parent's hand edit) is kept."""
    if sent is None:
        return notes
    since = local(sent.since)
    start = (since.date(), since.strftime("%H:%M"))
    kept = []
    for line in notes.split("\n"):
        m = _NOTE_TIME.match(line)
        at = (day, m.group(1)) if m else None
        if at is not None and (at > start or (at == start and sent.whole)):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


class CachedView:
    """A file's text passed through `transform`, recomputed only when the file changed (the
    store hands back the same str while it is unchanged)."""

    def __init__(self, memory: MemoryStore, relative: str, transform: Callable[[str], str]) -> None:
        self.memory = memory
        self.relative = relative
        self.transform = transform
        self._source: str | None = None
        self._view = ""

    def read(self) -> str:
        text = self.memory.text(self.relative) or ""
        if text is not self._source:
            self._source = text
            self._view = self.transform(text) if text else ""
        return self._view


def profile_view(text: str) -> str:
    """USER.md without comments; a file that is only a heading says nothing."""
    view = tidy(text)
    has_content = any(line.strip() and not line.startswith("#") for line in view.split("\n"))
    return view if has_content else ""


class MemorySource:
    def __init__(
        self,
        memory: MemoryStore,
        *,
        daily_section: str = daily.NOTES,
        sent_history: Callable[[str], SentHistory | None] | None = None,
    ) -> None:
        self.memory = memory
        self.daily_section = daily_section
        # what the model is sent of the scope's history this turn (TranscriptSessions.sent_history)
        self.sent_history = sent_history
        self._views: dict[tuple[str, str], CachedView] = {}

    def _read(self, relative: str, kind: str, transform: Callable[[str], str]) -> str:
        view = self._views.get((relative, kind))
        if view is None:
            if len(self._views) >= MAX_CACHED:
                self._views.clear()
            view = self._views[(relative, kind)] = CachedView(self.memory, relative, transform)
        return view.read()

    def _daily(self, text: str) -> str:
        return daily.prompt_view(text, self.daily_section)

    async def sections(self, turn: Turn, plan: TurnPlan) -> list[ContextSection]:
        found: list[ContextSection] = []
        speaker = turn.member
        if speaker is not None and turn.decide("read_memory", speaker, audit=False).allowed:
            found.append(self._profile(speaker, PRIORITY_SPEAKER))
        target = turn.envelope.target
        about_someone_else = target is not None and (speaker is None or target.id != speaker.id)
        # about someone else: decided, and audited, on every turn it happens
        if target is not None and about_someone_else and turn.decide("read_memory", target).allowed:
            found.append(self._profile(target, PRIORITY_TARGET))
        if turn.decide("read_memory", turn.scope, audit=False).allowed:
            found.extend(self._scope_sections(turn, notes=plan.notes))
        return [s for s in found if s.text.strip()]

    def _profile(self, member: Member, priority: int) -> ContextSection:
        text = self._read(user_md(member.id), "profile", profile_view)
        return ContextSection(f"What you know about {member.name}", cut_oldest(text, USER_TOKENS), priority)

    def _scope_sections(self, turn: Turn, *, notes: bool) -> list[ContextSection]:
        scope_id = turn.scope.id
        memory = self._read(memory_md(scope_id), "memory", facts.prompt_view)
        today = day_of(turn.envelope.ts)
        yesterday = today - timedelta(days=1)
        sections = [
            ContextSection("What you remember in this chat", cut_oldest(memory, MEMORY_TOKENS), PRIORITY_MEMORY)
        ]
        if not notes:  # small talk (L1): the durable facts, not what was said today
            return sections
        sent = self.sent_history(scope_id) if self.sent_history is not None else None
        for day, label, priority in ((today, "today", PRIORITY_TODAY), (yesterday, "yesterday", PRIORITY_YESTERDAY)):
            kept = notes_before(self._read(daily_md(scope_id, day), "daily", self._daily), day, sent)
            title = f"Notes from {day.isoformat()} ({label})"
            sections.append(ContextSection(title, cut_oldest(kept, DAILY_TOKENS), priority))
        return sections
