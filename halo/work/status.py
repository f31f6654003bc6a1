"""Status answers in work channels: "how are you doing?", "status of ContextForge?".

The answer is built from a status context — the task list (what is `doing` and its last
note, what is blocked and why, what is open by project, what finished recently) plus the
recent notes of work scopes — and from nothing else. Which scopes it reads is decided in
code by the policy (`ask_status` for the asker, `read_memory` for each scope, asked from
the work channel), and only `work_channel` scopes are ever candidates: a family scope
cannot reach a work answer even through a mistaken policy.

With routing on (halo/routing), the task list answers at L0: the answer is worded by rules,
at no model cost. With routing off, the model words the same facts (its request carries only
the status context and the question, no session, no tools); with no model, or the model
down, the rules word it. Either way it costs one short turn: a long model turn in another scope
does not hold this one up (the gateway runs scopes concurrently).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from agents import Agent, Model, ModelSettings, RunConfig, Runner

from config.settings import RoutingSettings
from halo.core.envelope import Scope
from halo.core.scopes import UnknownScopeError, resolve_scope
from halo.core.turn import Turn
from halo.routing.levels import CodeAnswer, Level, Route
from halo.work.tasks import Task, TaskStore
from memory import daily
from memory.markdown import section_body
from memory.store import MemoryStore, daily_md

log = logging.getLogger(__name__)

RECENTLY_DONE = timedelta(days=7)
NOTES_PER_SCOPE = 8
NOTE_CHARS = 240

_QUESTIONS = [
    re.compile(p, re.I)
    for p in (
        r"\bhow\s+(?:are|r)\s+(?:you|u|things|we)\s+(?:doing|getting on|going|coming along)\b",
        r"\bhow'?s\s+it\s+going\b",
        r"\bwhat\s+(?:are|r)\s+(?:you|u)\s+(?:working on|doing|up to|busy with|on)\b",
        r"\bare\s+(?:you|u)\s+busy\b",
        r"\bstatus\b",
        r"\bwhat(?:'s|\s+is|\s+are)\s+(?:blocked|stuck|in progress|open|done|left)\b",
        r"\b(?:any|what)\s+(?:progress|updates?)\b",
        r"\bwhere\s+are\s+(?:you|we)\s+(?:at|with)\b",
    )
]
_BLOCKED = re.compile(r"\b(?:blocked|stuck|blocking|blockers?)\b", re.I)

STATUS_INSTRUCTIONS = """\
You are halo, answering a status question in a team's work channel.
Answer only from the status facts below. Do not add any task, number, date, person,
reason or detail that is not in them; if the facts do not answer something, say so.
Keep it to a few short sentences or a short list.

Status facts:
"""

ModelStart = Callable[[], Awaitable[None]]


def is_status_question(text: str) -> bool:
    return any(p.search(text) for p in _QUESTIONS)


def asked_project(text: str, projects: list[str]) -> str | None:
    """The project a question names ("status of ContextForge?"), longest name first."""
    lowered = text.casefold()
    for name in sorted(projects, key=len, reverse=True):
        if re.search(rf"(?<!\w){re.escape(name.casefold())}(?!\w)", lowered):
            return name
    return None


@dataclass(frozen=True, slots=True)
class StatusFacts:
    """What a status answer may say: nothing outside these fields reaches it."""

    now: datetime
    project: str | None
    doing: list[Task] = field(default_factory=list)
    blocked: list[Task] = field(default_factory=list)
    todo: list[Task] = field(default_factory=list)
    done: list[Task] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # recent notes of work scopes
    only_blocked: bool = False

    @property
    def busy(self) -> bool:
        return bool(self.doing)

    def context(self) -> str:
        """The status context a model is given: the same facts the rules answer from."""
        lines = [f"Now: {self.now:%A %Y-%m-%d %H:%M %Z}"]
        if self.project:
            lines.append(f"Asked about project: {self.project}")
        lines.append("Busy: yes" if self.busy else "Busy: no (no task is in progress)")
        for title, tasks in (("In progress", self.doing), ("Blocked", self.blocked), ("To do", self.todo)):
            lines.append(f"{title}:" if tasks else f"{title}: none")
            lines.extend(f"- {_describe(t, self.now)}" for t in tasks)
        lines.append("Done in the last 7 days:" if self.done else "Done in the last 7 days: none")
        lines.extend(f"- {_describe(t, self.now)}" for t in self.done)
        if self.notes:
            lines.append("Recent notes from the work channels:")
            lines.extend(f"- {n}" for n in self.notes)
        return "\n".join(lines)


def _label(task: Task) -> str:
    return f"#{task.number} {task.title} ({task.project})"


def _ago(then: datetime, now: datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 90:
        return "just now"
    if seconds < 90 * 60:
        return f"{seconds // 60} min ago"
    if seconds < 36 * 3600:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


def _describe(task: Task, now: datetime) -> str:
    text = _label(task)
    if task.owner:
        text += f", owner {task.owner}"
    note = task.last_note
    if note is not None:
        kind = {"blocked": "why", "done": "done note"}.get(note.event, "last note")
        text += f" — {kind} ({_ago(note.at, now)}): {note.text}"
    return text


def rules_answer(facts: StatusFacts) -> str:
    """The answer worded by rules: the facts, in a fixed order, and nothing else."""
    now = facts.now
    about = f" on {facts.project}" if facts.project else ""
    if not (facts.doing or facts.blocked or facts.todo or facts.done):
        if facts.project:
            return f"I have no tasks for {facts.project}."
        return "I have no tasks on my list yet. Add one with /task add <project>: <title>."
    lines: list[str] = []
    if facts.only_blocked:
        if not facts.blocked:
            return f"Nothing is blocked{about}."
        lines.append(f"Blocked{about}:")
        lines.extend(f"- {_describe(t, now)}" for t in facts.blocked)
        return "\n".join(lines)
    if facts.doing:
        lines.append(f"I'm busy{about}, working on:")
        lines.extend(f"- {_describe(t, now)}" for t in facts.doing)
    else:
        lines.append(f"I'm not working on anything{about} right now.")
    if facts.blocked:
        lines.append("Blocked:")
        lines.extend(f"- {_describe(t, now)}" for t in facts.blocked)
    if facts.todo:
        lines.append("Up next:")
        by_project: dict[str, list[Task]] = {}
        for t in facts.todo:
            by_project.setdefault(t.project, []).append(t)
        for project, tasks in by_project.items():
            lines.append(f"- {project}: " + "; ".join(f"#{t.number} {t.title}" for t in tasks))
    if facts.done:
        lines.append("Done recently:")
        lines.extend(f"- {_label(t)}, {_ago(t.updated_at, now)}" for t in facts.done)
    return "\n".join(lines)


def readable_work_scopes(turn: Turn, candidates: set[str]) -> list[Scope]:
    """The work scopes this turn may read, decided by the policy in code."""
    family = turn.family
    allowed = []
    for scope_id in sorted(candidates | {f"discord:{c}" for c in family.work.discord_channel_ids}):
        try:
            scope = resolve_scope(family, scope_id)
        except UnknownScopeError:
            continue
        if scope.type != "work_channel" or not scope.configured:
            continue  # family scopes are never candidates, whatever the policy says
        if turn.decide("read_memory", scope, audit=False).allowed:
            allowed.append(scope)
    return allowed


class StatusAnswers:
    """Answers status questions in work channels before the gateway asks the model.

    Called by the gateway with the turn (its `answerers` list); returns None for anything
    that is not a status question in a work channel, and the whole answer otherwise.
    With routing off, `model` words the facts; with it on (`routing.enabled`, read at each
    question: it applies live) the rules word them, at L0.
    """

    def __init__(
        self,
        tasks: TaskStore,
        memory: MemoryStore,
        *,
        model: Model | None,
        model_settings: ModelSettings | None = None,
        tracing: bool = False,
        deadline_seconds: float = 45.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        routing: Callable[[], RoutingSettings] = RoutingSettings,
    ) -> None:
        self.routing = routing
        self.tasks = tasks
        self.memory = memory  # the work scopes' daily notes
        self.model = model
        self.model_settings = model_settings or ModelSettings()
        self.tracing = tracing
        self.deadline_seconds = deadline_seconds
        self.clock = clock

    async def __call__(self, turn: Turn, on_model_start: ModelStart | None = None) -> CodeAnswer | None:
        text = turn.envelope.text
        if turn.scope.type != "work_channel" or text.startswith("/") or not is_status_question(text):
            return None
        decision = turn.decide("ask_status")
        if not decision.allowed:
            return CodeAnswer(f"Sorry, I can't give status here: {decision.reason}")
        facts = await self.facts(turn)
        if self.model is not None and not self.routing().enabled:
            if on_model_start is not None:
                await on_model_start()
            worded = await self._word(facts, text)
            if worded:  # llm.model worded it: the transcript and the audit say L2, as for any reply
                return CodeAnswer(worded, Route(Level.L2, "status: the task list, worded by llm.model"))
        return CodeAnswer(rules_answer(facts), Route(Level.L0, "status: the task list answers"))

    async def facts(self, turn: Turn) -> StatusFacts:
        everything = await self.tasks.list()
        scopes = readable_work_scopes(turn, {t.scope_id for t in everything})
        readable = {s.id for s in scopes}
        tasks = [t for t in everything if t.scope_id in readable]
        project = asked_project(turn.envelope.text, sorted({t.project for t in tasks}))
        if project is None:
            named = re.search(r"\bstatus\s+(?:of|on|for)\s+([\w.\-]+)", turn.envelope.text, re.I)
            project = named.group(1) if named and named.group(1).lower() not in ("the", "things", "you") else None
        if project is not None:
            tasks = [t for t in tasks if t.project.casefold() == project.casefold()]
        now = self.clock()
        return StatusFacts(
            now=now,
            project=project,
            doing=[t for t in tasks if t.status == "doing"],
            blocked=[t for t in tasks if t.status == "blocked"],
            todo=[t for t in tasks if t.status == "todo"],
            done=[t for t in tasks if t.status == "done" and now - t.updated_at <= RECENTLY_DONE],
            notes=await asyncio.to_thread(self._recent_notes, [s.id for s in scopes], now.date()),
            only_blocked=bool(_BLOCKED.search(turn.envelope.text)),
        )

    def _recent_notes(self, scope_ids: list[str], today: date) -> list[str]:
        """Today's and yesterday's distilled notes of the given (work) scopes."""
        found: list[str] = []
        for scope_id in scope_ids:
            lines: list[str] = []
            for day in (today - timedelta(days=1), today):
                text = self.memory.text(daily_md(scope_id, day))
                if text is None:
                    continue
                body = section_body(text, daily.NOTES) or ""
                lines += [daily.one_line(line.lstrip("- "), NOTE_CHARS) for line in body.splitlines() if line.strip()]
            found += lines[-NOTES_PER_SCOPE:]
        return found

    async def _word(self, facts: StatusFacts, question: str) -> str | None:
        """The model words the facts; None when it cannot (the rules answer instead)."""
        assert self.model is not None
        agent = Agent(
            name="halo-status",
            instructions=STATUS_INSTRUCTIONS + facts.context(),
            model=self.model,
            model_settings=self.model_settings,
        )
        try:
            result = await asyncio.wait_for(
                Runner.run(agent, question, run_config=RunConfig(tracing_disabled=not self.tracing)),
                self.deadline_seconds,
            )
        except Exception as exc:  # the model down: the rules still answer
            log.warning("status wording by the model failed, answering by rules: %s", type(exc).__name__)
            return None
        return str(result.final_output or "").strip() or None
