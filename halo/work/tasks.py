"""The task list in halo.db: what halo is working on, so "how are you doing?" has a true answer.

A task has a number (shown to people, stable), a project, a title, a status (`todo`,
`doing`, `blocked`, `done`), an owner, the work scope it belongs to, and a dated log of
what happened to it (created, started, notes, blocked and why, done). The log is what a
status answer quotes and what the daily digest summarises; it is only ever appended to.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, get_args

from sqlalchemy import (
    Column,
    Float,
    ForeignKeyConstraint,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
    update,
)

from halo.storage import HaloDB
from halo.storage.family import FAMILY_COLUMN, family_column

Status = Literal["todo", "doing", "blocked", "done"]
STATUSES: tuple[Status, ...] = get_args(Status)
Event = Literal["created", "started", "note", "blocked", "done", "reopened"]

MAX_PROJECT = 80
MAX_TITLE = 300
MAX_NOTE = 2000

metadata = MetaData()
tasks_table = Table(
    "tasks",
    metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),
    Column("project", String(MAX_PROJECT), nullable=False, index=True),
    Column("title", String(MAX_TITLE), nullable=False),
    Column("status", String(16), nullable=False),
    Column("owner", String(64)),
    Column("scope_id", String(128), nullable=False, index=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    family_column(),  # declared here for the notes' key to name it
)
notes_table = Table(
    "task_notes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("task_number", Integer, nullable=False, index=True),
    Column("at", Float, nullable=False, index=True),
    Column("event", String(16), nullable=False),
    Column("text", Text, nullable=False, default=""),
    Column("by", String(64)),
    family_column(),
    ForeignKeyConstraint([FAMILY_COLUMN, "task_number"], [tasks_table.c.family_id, tasks_table.c.number]),
)


class TaskError(ValueError):
    """A task change that cannot be made; the message says why, for the person who asked."""


@dataclass(frozen=True, slots=True)
class TaskNote:
    at: datetime
    event: Event
    text: str
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Task:
    number: int
    project: str
    title: str
    status: Status
    owner: str | None
    scope_id: str
    created_at: datetime
    updated_at: datetime
    notes: tuple[TaskNote, ...] = ()

    @property
    def last_note(self) -> TaskNote | None:
        """The latest entry with words in it (a note, the reason it is blocked, a done note)."""
        return next((n for n in reversed(self.notes) if n.text), None)

    def as_json(self) -> dict[str, object]:
        return {
            "number": self.number,
            "project": self.project,
            "title": self.title,
            "status": self.status,
            "owner": self.owner,
            "scopeId": self.scope_id,
            "createdAt": self.created_at.isoformat(),
            "updatedAt": self.updated_at.isoformat(),
            "notes": [{"at": n.at.isoformat(), "event": n.event, "text": n.text, "by": n.by} for n in self.notes],
        }


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of a task's log, with the task as it is now (for digests)."""

    task: Task
    note: TaskNote


def _clean(text: str, limit: int, what: str) -> str:
    text = " ".join(text.split())
    if not text:
        raise TaskError(f"The {what} is empty.")
    if len(text) > limit:
        raise TaskError(f"The {what} is too long ({len(text)} characters; at most {limit}).")
    return text


def _when(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


class TaskStore:
    """Tasks and their logs. Every change and its log entry are one transaction."""

    def __init__(self, db: HaloDB, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    async def add(self, project: str, title: str, *, scope_id: str, by: str | None) -> Task:
        project = _clean(project, MAX_PROJECT, "project name")
        title = _clean(title, MAX_TITLE, "task title")
        now = self.clock()
        async with self.db.write(metadata) as conn:
            result = await conn.execute(
                insert(tasks_table).values(
                    project=project,
                    title=title,
                    status="todo",
                    owner=by,
                    scope_id=scope_id,
                    created_at=now,
                    updated_at=now,
                )
            )
            number = int(result.inserted_primary_key[0])  # type: ignore[index]
            await conn.execute(insert(notes_table).values(task_number=number, at=now, event="created", text="", by=by))
        return await self.get(number)

    async def start(self, number: int, *, by: str | None) -> Task:
        return await self._change(number, "doing", "started", "", by)

    async def note(self, number: int, text: str, *, by: str | None) -> Task:
        return await self._change(number, None, "note", _clean(text, MAX_NOTE, "note"), by)

    async def block(self, number: int, why: str, *, by: str | None) -> Task:
        return await self._change(number, "blocked", "blocked", _clean(why, MAX_NOTE, "reason"), by)

    async def done(self, number: int, note: str = "", *, by: str | None) -> Task:
        text = _clean(note, MAX_NOTE, "note") if note.strip() else ""
        return await self._change(number, "done", "done", text, by)

    async def _change(self, number: int, status: Status | None, event: Event, text: str, by: str | None) -> Task:
        now = self.clock()
        async with self.db.write(metadata) as conn:
            row = (await conn.execute(select(tasks_table).where(tasks_table.c.number == number))).mappings().first()
            if row is None:
                raise TaskError(f"There is no task {number}. /tasks lists them.")
            values: dict[str, object] = {"updated_at": now}
            if status is not None:
                if status == row["status"]:
                    raise TaskError(f"Task {number} is {status} already.")
                values["status"] = status
            if event == "started" and row["owner"] is None:
                values["owner"] = by
            await conn.execute(update(tasks_table).where(tasks_table.c.number == number).values(**values))
            await conn.execute(insert(notes_table).values(task_number=number, at=now, event=event, text=text, by=by))
        return await self.get(number)

    async def get(self, number: int) -> Task:
        tasks = await self._load(tasks_table.c.number == number)
        if not tasks:
            raise TaskError(f"There is no task {number}. /tasks lists them.")
        return tasks[0]

    async def list(self, *, project: str | None = None, scope_ids: Iterable[str] | None = None) -> builtins.list[Task]:
        """Tasks by number; `project` matches case-insensitively, `scope_ids` limits where from."""
        where = []
        if project:
            where.append(tasks_table.c.project.ilike(project.strip()))
        if scope_ids is not None:
            where.append(tasks_table.c.scope_id.in_(list(scope_ids)))
        return await self._load(*where)

    async def changes_since(self, since: datetime, *, scope_ids: Iterable[str]) -> builtins.list[Change]:
        """Log entries at or after `since` of tasks in these scopes, oldest first."""
        tasks = {t.number: t for t in await self.list(scope_ids=scope_ids)}
        cutoff = since.timestamp()
        found = [Change(t, n) for t in tasks.values() for n in t.notes if n.at.timestamp() >= cutoff]
        return sorted(found, key=lambda c: (c.note.at, c.task.number))

    async def _load(self, *where: object) -> builtins.list[Task]:
        async with self.db.read(metadata) as conn:
            query = select(tasks_table).order_by(tasks_table.c.number)
            for clause in where:
                query = query.where(clause)  # type: ignore[arg-type]
            rows = (await conn.execute(query)).mappings().all()
            numbers = [r["number"] for r in rows]
            notes: dict[int, list[TaskNote]] = {n: [] for n in numbers}
            if numbers:
                note_rows = (
                    await conn.execute(
                        select(notes_table)
                        .where(notes_table.c.task_number.in_(numbers))
                        .order_by(notes_table.c.at, notes_table.c.id)
                    )
                ).mappings()
                for n in note_rows:
                    notes[n["task_number"]].append(TaskNote(_when(n["at"]), n["event"], n["text"], n["by"]))
        return [
            Task(
                number=r["number"],
                project=r["project"],
                title=r["title"],
                status=r["status"],
                owner=r["owner"],
                scope_id=r["scope_id"],
                created_at=_when(r["created_at"]),
                updated_at=_when(r["updated_at"]),
                notes=tuple(notes[r["number"]]),
            )
            for r in rows
        ]
