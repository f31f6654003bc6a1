"""Setting, listing and cancelling reminders for the person in a turn: what `/remind`,
`/reminders` and the model's reminder tools share, so both ask the same parser and the same
policy and answer in the same words.

Who may remind whom is the policy's `remind` action (policy/family.cedar), asked about the
member reminded (for `parents`, about each parent) from the turn's scope; a refusal is
audited by the engine like every denial.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from config.family import Family, Member
from config.settings import ReminderSettings
from halo.core.member_words import find_member
from halo.core.turn import Turn
from halo.reminders.store import MAX_TEXT, PARENTS, Reminder, ReminderStore
from halo.reminders.when import WHEN_FORMS, Recurrence, When, WhenError, describe, parse_when, split_when
from policy import Decision, PolicyEngine

REMIND_USAGE = f"Usage: /remind [me|parents|<name>] <when> <text>   (when: {WHEN_FORMS}); /remind! … is urgent"


def _now() -> datetime:
    return datetime.now(UTC)


def zone_of(family: Family) -> ZoneInfo:
    return ZoneInfo(family.family.timezone)


def remind_context(children_may_remind_parents: bool) -> dict[str, bool]:
    """The policy context of every `remind` decision (also for `halo policy explain`)."""
    return {"children_may_remind_parents": children_may_remind_parents}


def decide_remind(
    policy: PolicyEngine, turn: Turn, target: str, children_may_remind_parents: bool, *, audit: bool = True
) -> list[Decision]:
    """The policy's answer for each member `target` stands for ("parents": each parent)."""
    family = turn.family
    members = family.parents if target == PARENTS else [m for m in [family.member(target)] if m is not None]
    return [
        turn.decide("remind", member, audit=audit, **remind_context(children_may_remind_parents)) for member in members
    ]


def _is_for(reminder: Reminder, member: Member) -> bool:
    return reminder.target == member.id or (reminder.target == PARENTS and member.is_parent)


class Reminders:
    """The reminder answers of one halo. `wake` tells the scheduler its next time may have changed."""

    def __init__(
        self,
        store: ReminderStore,
        *,
        settings: Callable[[], ReminderSettings],
        wake: Callable[[], None] = lambda: None,
        clock: Callable[[], datetime] = _now,
        tell: Callable[[str, str], Awaitable[object]] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings  # read at each use: halo.yaml's `reminders:` applies live
        self.wake = wake
        self.clock = clock
        self.tell = tell  # (member id, text): a message to that member's own DM (halo/family/direct.py)

    # --- setting -----------------------------------------------------------------------

    async def set_from_command(self, turn: Turn, args: str, *, urgent: bool = False) -> str:
        """`[who] <when> <text>`: who is me (the default), parents, or a member's id or name."""
        words = args.split()
        if not words:
            return REMIND_USAGE
        who = "me"
        if words[0].lower() in ("me", PARENTS) or find_member(turn.family, words[0]) is not None:
            who, words = words[0], words[1:]
        zone = zone_of(turn.family)
        try:
            when, rest = split_when(words, self.clock(), zone)
        except WhenError as exc:
            return f"{exc}\n{REMIND_USAGE}"
        return await self.set(turn, who, when, " ".join(rest), urgent=urgent)

    async def set_from_words(self, turn: Turn, who: str, when_text: str, text: str, *, urgent: bool = False) -> str:
        """The model's form: the three parts separately."""
        try:
            when = parse_when(when_text, self.clock(), zone_of(turn.family))
        except WhenError as exc:
            return str(exc)
        return await self.set(turn, who or "me", when, text, urgent=urgent)

    async def set(self, turn: Turn, who: str, when: When, text: str, *, urgent: bool) -> str:
        member = turn.member
        if member is None:
            return "Only members of the family can set reminders."
        text = " ".join(text.split())
        if text[:3].lower() == "to ":
            text = text[3:]
        if not text:
            return f"What should I remind {'you' if who == 'me' else who} of?\n{REMIND_USAGE}"
        if len(text) > MAX_TEXT:
            return f"That reminder is too long ({len(text)} characters; at most {MAX_TEXT})."
        target, label = self.target(turn, who)
        if target is None:
            names = ", ".join(m.name for m in turn.family.members)
            return f"I don't know who {who!r} is. I can remind: me, parents, {names}."
        refused = next(
            (
                d
                for d in decide_remind(turn.policy, turn, target, self.settings().children_may_remind_parents)
                if not d.allowed
            ),
            None,
        )
        if refused is not None:
            if target == member.id:  # only the safety screen's verdict refuses a reminder for oneself
                return f"Sorry, I can't set that reminder: {refused.reason}"
            return f"Sorry, you can't set reminders for {label}: {refused.reason}"
        now = self.clock()
        reminder = await self.store.add(
            set_by=member.id, target=target, text=text, scope_id=turn.scope.id, when=when, urgent=urgent, now=now
        )
        self.wake()
        zone = zone_of(turn.family)
        at = describe(reminder.due_at, zone, now)
        repeat = f" ({Recurrence.parse(reminder.every).describe()})" if reminder.every else ""
        whom = "you" if target == member.id else label
        mark = "Urgent: " if urgent else ""
        return f"{mark}OK, I'll remind {whom} {at}{repeat}: {text}"

    @staticmethod
    def target(turn: Turn, who: str) -> tuple[str | None, str]:
        """Who `who` means (me, parents, a member's name or id): their id and how to name them;
        None for anyone else."""
        word = who.strip().lower()
        assert turn.member is not None
        if word in ("", "me", "myself", turn.member.id):
            return turn.member.id, turn.member.name
        if word in (PARENTS, "the parents"):
            return PARENTS, "the parents"
        found = find_member(turn.family, word)
        return (found.id, found.name) if found else (None, who)

    # --- listing and cancelling ----------------------------------------------------------

    async def mine(self, turn: Turn) -> list[Reminder]:
        """What /reminders numbers: the pending ones this member set or is reminded by."""
        member = turn.member
        if member is None:
            return []
        return await self.store.pending_for(member.id, is_parent=member.is_parent)

    async def listing(self, turn: Turn) -> str:
        if turn.member is None:
            return "Only members of the family have reminders."
        found = await self.mine(turn)
        if not found:
            return "No reminders. Set one with /remind <when> <text>."
        family, zone, now = turn.family, zone_of(turn.family), self.clock()
        lines = [f"{n}. {self.line(r, turn.member, family, zone, now)}" for n, r in enumerate(found, 1)]
        return "\n".join([*lines, "Cancel one with /reminders cancel N."])

    @staticmethod
    def line(reminder: Reminder, member: Member, family: Family, zone: ZoneInfo, now: datetime) -> str:
        at = describe(reminder.due_at, zone, now)
        repeat = f", {Recurrence.parse(reminder.every).describe()}" if reminder.every else ""
        if reminder.target == member.id and reminder.set_by == member.id:
            whom = ""
        elif reminder.set_by == member.id:
            target = family.member(reminder.target)
            whom = f" for {target.name if target else reminder.target}"
        else:
            setter = family.member(reminder.set_by)
            whom = f" from {setter.name if setter else reminder.set_by}"
        urgent = " (urgent)" if reminder.urgent else ""
        return f"{at}{repeat}{whom}{urgent}: {reminder.text}"

    async def cancel(self, turn: Turn, number: int) -> str:
        member = turn.member
        if member is None:
            return "Only members of the family have reminders."
        found = await self.mine(turn)
        if not 1 <= number <= len(found):
            return f"There is no reminder {number}. /reminders lists them."
        reminder = found[number - 1]
        if reminder.set_by != member.id:
            setter = turn.family.member(reminder.set_by)
            return f"Only {setter.name if setter else reminder.set_by}, who set it, can cancel reminder {number}."
        if not await self.store.cancel(reminder.id):
            return f"Reminder {number} has just gone off or was cancelled already."
        self.wake()
        return f"Cancelled: {reminder.text}"

    async def done(self, turn: Turn, reminder_id: int) -> str:
        """A fired reminder's Done: said by the person it was for (any parent, for one to the
        parents), and whoever set it for them is told."""
        member, reminder = turn.member, await self.store.get(reminder_id)
        if member is None or reminder is None or not _is_for(reminder, member):
            return "You have no reminder with that number."
        if reminder.fired == 0:  # nobody was reminded yet: nothing to tell whoever set it
            return f"That reminder has not gone off yet: {reminder.text}."
        setter = turn.family.member(reminder.set_by)
        if setter is None or setter.id == member.id or self.tell is None:
            return f"Done: {reminder.text}."
        await self.tell(setter.id, f"{member.name} marked your reminder done: {reminder.text}")
        return f"Done: {reminder.text}. I told {setter.name}."

    def who_may_i_remind(self, turn: Turn) -> str:
        """One line for /whoami: whom the policy lets this member remind, from here."""
        if turn.member is None:
            return "- remind: nobody (you are not in the family config)"
        targets = [("yourself", turn.member.id), *((m.name, m.id) for m in turn.family.members if m != turn.member)]
        targets.append(("parents", PARENTS))
        allowed = [
            label
            for label, target in targets
            if (d := decide_remind(turn.policy, turn, target, self.settings().children_may_remind_parents, audit=False))
            and all(x.allowed for x in d)
        ]
        return f"- remind: {', '.join(allowed) or 'nobody'} (see `halo policy explain --action remind`)"
