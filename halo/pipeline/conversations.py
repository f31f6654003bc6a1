"""`halo.port.Conversations` over the transcripts: a member's chat read back for the web chat.

The transcript is the record of a conversation, so the page shows it rather than a copy. A
cursor is a line's byte offset in the scope's transcript (on PostgreSQL, the lines held in
memory, made current first), so paging back never skips or repeats a message.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from config.family import Family
from halo.core.times import family_zone, say_time
from halo.port import HistoryLine
from transcripts import TranscriptLine, TranscriptStore
from transcripts.lines import Alert, Message, Notice, Reply


class TranscriptConversations:
    def __init__(self, transcripts: TranscriptStore, family: Callable[[], Family]) -> None:
        self._transcripts = transcripts
        self._family = family

    async def earlier(self, scope_id: str, before: int | None, limit: int) -> list[HistoryLine]:
        await self._transcripts.ready(scope_id)
        return await asyncio.to_thread(self._read, scope_id, before, limit)

    def _read(self, scope_id: str, before: int | None, limit: int) -> list[HistoryLine]:
        kept: deque[HistoryLine] = deque(maxlen=max(limit, 0))
        reader = self._transcripts.read_from(scope_id)
        try:
            for offset, line in reader:
                if before is not None and offset >= before:
                    break
                if (shown := self._shown(offset, line)) is not None:
                    kept.append(shown)
        finally:
            reader.close()
        return list(kept)

    def _shown(self, offset: int, line: TranscriptLine) -> HistoryLine | None:
        """A line the member saw: theirs, halo's answer, or what the outbox sent them (an alert is
        an `event` line with the outbox's id); None for halo's own notes."""
        if not line.text.strip() or not isinstance(line, Message | Reply | Notice | Alert):
            return None
        ts = line.ts if line.ts.tzinfo else line.ts.replace(tzinfo=UTC)
        role: Literal["user", "assistant"] = "user" if isinstance(line, Message) else "assistant"
        if isinstance(line, Notice | Alert):
            return HistoryLine(offset, role, line.text, ts, self.say_time(ts), line.kind or "notice", line.outbox_id)
        return HistoryLine(offset, role, line.text, ts, self.say_time(ts))

    def say_time(self, at: datetime) -> str:
        return say_time(at, family_zone(self._family()), datetime.now(UTC))
