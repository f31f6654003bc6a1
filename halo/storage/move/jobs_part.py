"""Memory jobs' progress as a part of a move: distillation's and extraction's states, in halo.db's
`memory_jobs` (memory/state.py, no family column: the file is one family's) or PostgreSQL's
(halo/storage/job_rows.py, keyed by family). Graph memory's progress stays with the local graph
it describes, so it is not moved: a moved family builds its graph again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, select

from halo.storage.job_rows import RECORDED_JOBS
from halo.storage.job_rows import memory_jobs as family_jobs
from halo.storage.move.digest import canonical
from halo.storage.move.part import Postgres, Side
from memory import state as local

FIELDS = ("scope_id", "job", "offset", "runs", "items", "last_run", "last_success", "last_error", "failures",
          "next_retry", "pending")  # fmt: skip


class JobsPart:
    name = "memory jobs"
    ordered = False

    def __init__(self, family_id: str) -> None:
        self.family_id = family_id

    async def _rows(self, side: Side) -> list[dict[str, Any]]:
        if isinstance(side, Postgres):
            table = family_jobs
            result = await side.conn.execute(select(*(table.c[f] for f in FIELDS)))
        else:
            if side.db is None or not await side.db.run_sync(lambda c: inspect(c).has_table("memory_jobs")):
                return []
            table = local.memory_jobs
            result = await side.db.execute(select(*(table.c[f] for f in FIELDS)))
        rows = [dict(row) for row in result.mappings().all() if row["job"] in RECORDED_JOBS]
        for row in rows:
            row["pending"] = json.dumps(json.loads(row["pending"] or "[]"))  # one spelling on both sides
        return sorted(rows, key=lambda r: (r["scope_id"], r["job"]))

    async def count(self, side: Side) -> int:
        return len(await self._rows(side))

    async def read(self, side: Side) -> AsyncIterator[Sequence[dict[str, Any]]]:
        rows = await self._rows(side)
        if rows:
            yield rows

    def canonical(self, record: dict[str, Any]) -> bytes:
        return canonical(record[f] for f in FIELDS)

    async def prepare(self, side: Side) -> None:
        if isinstance(side, Postgres):
            await side.conn.execute(family_jobs.delete())
        elif side.db is not None:
            await side.db.run_sync(lambda c: local.memory_jobs.create(c, checkfirst=True))
            await side.db.execute(local.memory_jobs.delete().where(local.memory_jobs.c.job.in_(sorted(RECORDED_JOBS))))

    async def write(self, side: Side, records: Sequence[dict[str, Any]]) -> None:
        if isinstance(side, Postgres):
            await side.conn.execute(family_jobs.insert(), [{**r, "family_id": self.family_id} for r in records])
        elif side.db is not None:
            await side.db.execute(local.memory_jobs.insert(), list(records))

    async def finish(self, side: Side) -> None:
        return None

    def local_paths(self, home: Path) -> list[Path]:
        return []  # in halo.db, which the move replaces whole
