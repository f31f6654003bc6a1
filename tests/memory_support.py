"""Helpers for the memory tests: a HALO_HOME's memory parts without the rest of halo."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from config.paths import HaloPaths
from memory.distill import Distiller
from memory.scope_files import ScopeFiles, ScopeInfo
from memory.state import JobStateStore
from transcripts import TranscriptStore
from transcripts.lines import Message, Reply

NAMES = {"mom": "Mom", "wags": "Wags", "aarav": "Aarav", "halo": "halo"}
T0 = datetime(2026, 2, 13, 9, 0, tzinfo=UTC)


def names(label: str | None) -> str:
    return NAMES.get(label or "", label or "someone")


@dataclass
class MemoryKit:
    """Paths, a transcript store, the job state and a Distiller over one temporary HALO_HOME."""

    home: Path
    denied: set[str] = field(default_factory=set)  # speakers the "policy" keeps out of memory
    clock_value: float = 1_770_000_000.0

    def __post_init__(self) -> None:
        self.paths = HaloPaths(self.home)
        self.paths.ensure()
        self.transcripts = TranscriptStore(self.paths.transcripts)
        self.state = JobStateStore(self.paths.halo_db)
        self.files = ScopeFiles(self.paths, lambda scope_id: ScopeInfo(scope_id, "dm", "mom", ["mom"], "Mom's DM"))
        self.distiller = self.new_distiller()
        self._n = 0

    def clock(self) -> float:
        return self.clock_value

    def may_write(self, speaker: str | None, scope_id: str) -> bool:
        return speaker not in self.denied

    def new_distiller(self) -> Distiller:
        return Distiller(
            self.files, self.transcripts, self.state, names=names, may_write=self.may_write, clock=self.clock
        )

    async def say(
        self, scope_id: str, text: str, speaker: str = "mom", role: str = "user", ts: datetime | None = None
    ) -> int:
        self._n += 1
        line = (Message if role == "user" else Reply)(
            id=uuid.uuid4().hex,
            ts=ts or T0 + timedelta(minutes=self._n),
            scope_id=scope_id,
            text=text,
            speaker=speaker if role == "user" else "halo",
        )
        return await self.transcripts.append(line)

    async def exchange(self, scope_id: str, text: str, reply: str = "Okay.", speaker: str = "mom") -> None:
        await self.say(scope_id, text, speaker)
        await self.say(scope_id, reply, role="assistant")

    def memory(self, scope_id: str) -> str:
        return self.files.memory_text(scope_id)

    def day_file(self, scope_id: str, ts: datetime = T0) -> Path:
        from memory.when import day_of

        return self.paths.daily_file(scope_id, day_of(ts))
