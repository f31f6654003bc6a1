"""Firing reminders: one timer for the earliest due reminder, not one job per reminder.

At its time a reminder becomes one message to each target's own DM (`halo/family/direct.py`), queued in
halo's outbox in the same transaction that marks it fired (`ReminderStore.fire`), then sent
by `Delivery` like every other message: no model is asked. Quiet hours hold a non-urgent one
until they end. A recurring one gets its next time from its `Recurrence` (APScheduler's
`CronTrigger`). One whose time passed while halo was down goes late, marked so, within
`reminders.catch_up_minutes`; an older one is not sent, and whoever set it is told instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from config.family import Family, Member
from config.settings import ReminderSettings
from halo.core.envelope import Scope
from halo.family.direct import DirectMessages
from halo.outbound.asks import Asks, Option
from halo.outbound.delivery import Delivery
from halo.port import Audit, Choice
from halo.reminders.store import PARENTS, Firing, Message, Reminder, ReminderStore
from halo.reminders.when import Recurrence, describe

log = logging.getLogger(__name__)

LATE_AFTER = timedelta(minutes=2)  # sent later than this after its time: the message says so
SNOOZE_LASTS = timedelta(days=1)  # a fired reminder's buttons; /remind typed works any time
BATCH = 200  # due reminders fired per transaction
LONGEST_SLEEP = 300.0  # seconds: the timer looks again at least this often (a changed wall clock)


def _now() -> datetime:
    return datetime.now(UTC)


QuietUntil = Callable[[Scope, datetime], datetime | None]


def reminder_text(reminder: Reminder, family: Family, *, late_since: str | None = None) -> str:
    """ "Mom asked me to remind you: …", or "Reminder: …" for one's own."""
    setter = family.member(reminder.set_by)
    if reminder.target == reminder.set_by or setter is None:
        text = f"Reminder: {reminder.text}"
    else:
        text = f"{setter.name} asked me to remind you: {reminder.text}"
    if late_since is not None:
        text += f"\n(Late: it was due {late_since}; I was not running then.)"
    return text


def snooze_options(reminder: Reminder, zone: ZoneInfo) -> tuple[Option, ...]:
    """A fired reminder's buttons: done (whoever set it is told), or the /remind its target
    would type to hear it again."""
    text = reminder.text
    same_time = reminder.due_at.astimezone(zone).strftime("%H:%M")
    return (
        Option("Done", f"/reminders done {reminder.id}"),
        Option("Snooze 10 min", f"/remind me in 10m {text}"),
        Option("Snooze 1 h", f"/remind me in 1h {text}"),
        Option("Tomorrow", f"/remind me tomorrow {same_time} {text}"),
    )


class ReminderScheduler:
    """Sleeps until the earliest pending reminder is due, fires what is due, and sleeps again.
    `wake()` after a reminder is added or cancelled; `fire_due()` is one pass (tests call it
    with their own `clock`)."""

    def __init__(
        self,
        store: ReminderStore,
        delivery: Delivery,
        direct: DirectMessages,
        family: Callable[[], Family],
        *,
        quiet_until: QuietUntil,
        audit: Audit | None = None,
        settings: Callable[[], ReminderSettings] = ReminderSettings,
        clock: Callable[[], datetime] = _now,
        asks: Asks | None = None,
    ) -> None:
        self.asks = asks  # a fired reminder carries done · snooze buttons
        self.store = store
        self.direct = direct
        self.delivery = delivery
        self.family = family
        self.quiet_until = quiet_until
        self.audit = audit
        self.settings = settings  # reminders.catch_up_minutes, read at each firing: it applies live
        self.clock = clock
        self.fired = 0  # messages queued by this run (status, bench)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._pass = asyncio.Lock()

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="reminders")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.fire_due()
                following = await self.store.next_due()
            except Exception:  # a database hiccup must not stop reminders for good
                log.exception("firing reminders failed; trying again shortly")
                following = self.clock() + timedelta(seconds=5)
            pause = LONGEST_SLEEP
            if following is not None:
                pause = min(max((following - self.clock()).total_seconds(), 0.0), LONGEST_SLEEP)
            with contextlib.suppress(TimeoutError):  # not wait_for: 3.11 loses a cancel (test_background_loops_stop)
                async with asyncio.timeout(pause):
                    await self._wake.wait()

    async def fire_due(self) -> int:
        """Fire everything due now; returns how many messages were queued."""
        queued = 0
        async with self._pass:
            while due := await self.store.due(self.clock(), BATCH):
                now = self.clock()
                firings: list[Firing] = []
                for reminder in due:
                    firing = await self._firing(reminder, now)
                    if firing is not None:
                        firings.append(firing)
                rows = await self.store.fire(firings, self._queue_in, now)
                await self.delivery.committed(rows)
                queued += len(rows)
                self._audit_fired(firings)
                if len(due) < BATCH:
                    break
        self.fired += queued
        return queued

    async def _queue_in(self, conn, message: Message):  # type: ignore[no-untyped-def]
        choices: tuple[Choice, ...] = ()
        if self.asks is not None and message.options and message.about is not None:
            choices = await self.asks.record(list(message.options), who=message.about, ttl=SNOOZE_LASTS, conn=conn)
        return await self.delivery.add_in(
            conn, message.scope_id, message.text, kind="notice", about=message.about, choices=choices
        )

    def _targets(self, reminder: Reminder, family: Family) -> list[Member]:
        if reminder.target == PARENTS:
            return list(family.parents)
        member = family.member(reminder.target)
        return [member] if member is not None else []

    async def _firing(self, reminder: Reminder, now: datetime) -> Firing | None:
        """What this due reminder does now; None when quiet hours held it for later."""
        family = self.family()
        zone = ZoneInfo(family.family.timezone)
        following = self._following(reminder, now, zone)
        scopes = [scope for m in self._targets(reminder, family) if (scope := self.direct.scope_of(m.id)) is not None]
        if now - reminder.due_at > timedelta(minutes=self.settings().catch_up_minutes):
            return self._missed(reminder, family, zone, now, following)
        if not reminder.urgent:
            ends = [end for scope in scopes if (end := self.quiet_until(scope, now)) is not None]
            if ends and await self.store.hold(reminder, max(ends)):
                return None
        late = describe(reminder.due_at, zone, now) if now - reminder.due_at > LATE_AFTER else None
        text = reminder_text(reminder, family, late_since=late)
        options = snooze_options(reminder, zone)
        messages = [Message(scope.id, text, about=scope.owner_id, options=options) for scope in scopes]
        return Firing(reminder, messages, state="done", next_due=following)

    def _missed(
        self, reminder: Reminder, family: Family, zone: ZoneInfo, now: datetime, following: datetime | None
    ) -> Firing:
        """Too late to be of use: the setter hears about it, the target does not."""
        setter = family.member(reminder.set_by)
        target = family.member(reminder.target)
        whom = "you" if reminder.target == reminder.set_by else (target.name if target else reminder.target)
        text = (
            f"I was not running when your reminder for {whom} was due ({describe(reminder.due_at, zone, now)}), "
            f"and it is too late to send now: {reminder.text}"
        )
        if following is not None:
            text += f"\nThe next one is {describe(following, zone, now)}."
        messages = []
        if setter is not None and (scope := self.direct.scope_of(setter.id)) is not None:
            messages.append(Message(scope.id, text, about=setter.id))
        if self.audit is not None:
            self.audit.write("reminder_missed", reminder_id=reminder.id, set_by=reminder.set_by, target=reminder.target)
        return Firing(reminder, messages, state="missed", next_due=following, counts_as_fired=False)

    @staticmethod
    def _following(reminder: Reminder, now: datetime, zone: ZoneInfo) -> datetime | None:
        """A recurring reminder's next time: after this occurrence, and after now (a long
        outage skips the occurrences it slept through)."""
        if reminder.every is None:
            return None
        return Recurrence.parse(reminder.every).next_after(max(reminder.occurrence_at, now), zone)

    def _audit_fired(self, firings: list[Firing]) -> None:
        if self.audit is None:
            return
        for firing in firings:
            if firing.counts_as_fired:
                self.audit.write(
                    "reminder_fired",
                    reminder_id=firing.reminder.id,
                    set_by=firing.reminder.set_by,
                    target=firing.reminder.target,
                    scopes=[m.scope_id for m in firing.messages],
                )
