"""The list answers of one halo, shared by `/list` and the model's list tools.

Showing a list is reading the scope's memory (`read_memory`), changing it is writing it
(`write_memory`): the policy that keeps a DM's memory private and the family group's its
own keeps their lists the same way. Only the turn's own scope is ever read or written.
"""

from __future__ import annotations

from collections.abc import Sequence

from config.family import Member
from halo.core.member_words import find_member
from halo.core.turn import Turn
from halo.lists.store import DEFAULT_LIST, ListError, ListItem, ListStore, list_name

LIST_USAGE = "Usage: /list [name] · /list [name] add milk, eggs · /list [name] done 2|milk · /list [name] clear"


def _title(name: str | None) -> str:
    stored = list_name(name)
    return "The list" if stored == DEFAULT_LIST else f"The {stored} list"


def render(items: Sequence[ListItem], name: str | None) -> str:
    if not items:
        return f"{_title(name)} is empty."
    lines = [f"{_title(name)}:"]
    for n, item in enumerate(items, 1):
        lines.append(f"{n}. ~{item.text}~ (done)" if item.done else f"{n}. {item.text}")
    return "\n".join(lines)


class Lists:
    def __init__(self, store: ListStore) -> None:
        self.store = store

    def _refused(self, turn: Turn, change: bool, name: str | None) -> str | None:
        if (owner := _someone_elses(turn, name)) is not None:
            return (
                f"Lists belong to a chat, and the lists here are this chat's: I can't reach {owner.name}'s "
                f"from here. {owner.name} keeps their own in their chat with me."
            )
        decision = turn.decide("write_memory" if change else "read_memory")
        if decision.allowed:
            return None
        return (
            f"Sorry, I can't change this list: {decision.reason}" if change else f"Sorry, not here: {decision.reason}"
        )

    async def show(self, turn: Turn, name: str | None = None) -> str:
        if refused := self._refused(turn, False, name):
            return refused
        text = render(await self.store.items(turn.scope.id, name), name)
        others = [n for n in await self.store.names(turn.scope.id) if n not in (list_name(name), DEFAULT_LIST)]
        if others:
            text += f"\nOther lists here: {', '.join(others)}."
        return text

    async def add(self, turn: Turn, name: str | None, items: Sequence[str]) -> str:
        if refused := self._refused(turn, True, name):
            return refused
        try:
            added = await self.store.add(turn.scope.id, name, items, by=turn.envelope.speaker.label)
        except ListError as exc:
            return str(exc)
        return f"Added to {_title(name).lower().removeprefix('the ')}: {', '.join(added)}."

    async def check_off(self, turn: Turn, name: str | None, ref: str) -> str:
        if refused := self._refused(turn, True, name):
            return refused
        try:
            item = await self.store.check_off(turn.scope.id, name, ref, by=turn.envelope.speaker.label)
        except ListError as exc:
            return str(exc)
        return f"Done: {item.text}."

    async def clear(self, turn: Turn, name: str | None) -> str:
        if refused := self._refused(turn, True, name):
            return refused
        gone = await self.store.clear_done(turn.scope.id, name)
        return f"Removed {gone} done item{'s' if gone != 1 else ''} from {_title(name).lower()}."

    async def command(self, turn: Turn, args: str) -> str:
        """`/list [name] [add a, b | done N|words | clear]`. Without a name: the list in use here
        (the one last added to), so `/list` after "add eggs to the shopping list" shows it."""
        words = args.split()
        verbs = ("add", "done", "clear", "check")
        at = next((i for i, w in enumerate(words) if w.lower() in verbs), None)
        name = " ".join(words[:at] if at is not None else words) or None
        try:
            list_name(name)
        except ListError as exc:
            return str(exc)
        if name is None:
            name = await self.store.in_use(turn.scope.id)
        if at is None:
            return await self.show(turn, name)
        verb, rest = words[at].lower(), " ".join(words[at + 1 :])
        if verb == "add":
            return await self.add(turn, name, rest.split(",")) if rest.strip() else LIST_USAGE
        if verb in ("done", "check"):
            return await self.check_off(turn, name, rest) if rest.strip() else LIST_USAGE
        return await self.clear(turn, name) if not rest.strip() else LIST_USAGE


def _someone_elses(turn: Turn, name: str | None) -> Member | None:
    """The member a list name says it belongs to ("mom", "mom's shopping") when that is someone
    else and this is a private chat: a DM's lists are its owner's, and halo never reaches
    another member's from here (a list called "mom" would only look like hers)."""
    if not name or turn.scope.type != "dm":
        return None
    owner = find_member(turn.family, name.split()[0])
    return owner if owner is not None and owner != turn.member else None
