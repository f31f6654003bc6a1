"""The work digest: the day's task changes, posted to the work channels on a schedule.

`work.digest` says when, e.g. "mon-fri 17:00" or "daily 09:30", in the family's time zone.
The digest is worded by rules from the task log — it costs no model tokens — and reads
only tasks of configured work channels. A day with no changes posts nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from config.family import Family
from config.schedule import DigestSchedule, parse_schedule
from halo.core.times import say_day
from halo.work.tasks import Change, TaskStore

log = logging.getLogger(__name__)

_SAID = {"created": "added", "started": "started", "note": "note", "blocked": "blocked", "done": "done"}

Send = Callable[[str, str], Awaitable[object]]


def digest_text(changes: list[Change], day: datetime) -> str | None:
    """One line per task that changed today, in task order; None when nothing changed."""
    if not changes:
        return None
    by_task: dict[int, list[Change]] = {}
    for change in changes:
        by_task.setdefault(change.task.number, []).append(change)
    lines = [f"Work digest for {say_day(day.date())}:"]  # halo's one date format (halo/core/times.py)
    for number in sorted(by_task):
        task = by_task[number][-1].task
        events = []
        for c in by_task[number]:
            said = _SAID.get(c.note.event, c.note.event)
            events.append(f"{said}: {c.note.text}" if c.note.text else said)
        lines.append(f"- #{number} {task.title} ({task.project}) — {'; '.join(events)} [now {task.status}]")
    return "\n".join(lines)


class WorkDigest:
    """Posts the digest to every configured work channel at the scheduled times."""

    def __init__(
        self,
        schedule: DigestSchedule,
        tasks: TaskStore,
        send: Send,
        family: Callable[[], Family],
        zone: tzinfo | None = None,
    ) -> None:
        self.schedule = schedule
        self.tasks = tasks
        self.send = send
        self.family = family
        self.zone = zone or datetime.now().astimezone().tzinfo
        self._scheduler: AsyncIOScheduler | None = None

    @classmethod
    def from_family(cls, family: Callable[[], Family], tasks: TaskStore, send: Send) -> WorkDigest | None:
        """The digest halo.yaml asks for (None when it asks for none); `family` is the live
        family, so channels added later get it too. Schedule and zone are read at start-up."""
        now = family()
        if not now.work.digest:
            return None
        zone = ZoneInfo(now.family.timezone) if now.family.timezone else None
        return cls(parse_schedule(now.work.digest), tasks, send, family, zone)

    def start(self) -> None:
        at = self.schedule.at
        trigger = CronTrigger(day_of_week=self.schedule.days, hour=at.hour, minute=at.minute, timezone=self.zone)
        self._scheduler = AsyncIOScheduler(timezone=self.zone)
        self._scheduler.add_job(self.post, trigger, id="work-digest", coalesce=True, misfire_grace_time=3600)
        self._scheduler.start()

    async def text(self, now: datetime | None = None) -> str | None:
        now = (now or datetime.now(self.zone)).astimezone(self.zone)
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        scopes = [f"discord:{c}" for c in self.family().work.discord_channel_ids]
        return digest_text(await self.tasks.changes_since(midnight, scope_ids=scopes), now)

    async def post(self, now: datetime | None = None) -> list[str]:
        """Send today's digest to each work channel; returns the scope ids it went to."""
        text = await self.text(now)
        if text is None:
            return []
        sent = []
        for channel in self.family().work.discord_channel_ids:
            scope_id = f"discord:{channel}"
            try:
                await self.send(scope_id, text)
                sent.append(scope_id)
            except Exception:
                log.exception("posting the work digest to %s failed", scope_id)
        return sent

    def close(self) -> None:
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
