"""The list answers of one halo, shared by `/list` and the model's list tools.

Showing a list is reading the scope's memory (`read_memory`), changing it is writing it
(`write_memory`): the policy that keeps a DM's memory private and the family group's its
own keeps their lists the same way. Only the turn's own scope is ever read or written.
"""

from __future__ import annotations

from collections.abc import Sequence

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

    def _refused(self, turn: Turn, change: bool) -> str | None:
        decision = turn.decide("write_memory" if change else "read_memory")
        return None if decision.allowed else f"Sorry, not here: {decision.reason}"

    async def show(self, turn: Turn, name: str | None = None) -> str:
        if refused := self._refused(turn, change=False):
            return refused
        text = render(await self.store.items(turn.scope.id, name), name)
        others = [n for n in await self.store.names(turn.scope.id) if n not in (list_name(name), DEFAULT_LIST)]
        if others:
            text += f"\nOther lists here: {', '.join(others)}."
        return text

    async def add(self, turn: Turn, name: str | None, items: Sequence[str]) -> str:
        if refused := self._refused(turn, change=True):
            return refused
        try:
            added = await self.store.add(turn.scope.id, name, items, by=turn.envelope.speaker.label)
        except ListError as exc:
            return str(exc)
        return f"Added to {_title(name).lower().removeprefix('the ')}: {', '.join(added)}."

    async def check_off(self, turn: Turn, name: str | None, ref: str) -> str:
        if refused := self._refused(turn, change=True):
            return refused
        try:
            item = await self.store.check_off(turn.scope.id, name, ref, by=turn.envelope.speaker.label)
        except ListError as exc:
            return str(exc)
        return f"Done: {item.text}."

    async def clear(self, turn: Turn, name: str | None) -> str:
        if refused := self._refused(turn, change=True):
            return refused
        gone = await self.store.clear_done(turn.scope.id, name)
        return f"Removed {gone} done item{'s' if gone != 1 else ''} from {_title(name).lower()}."

    async def command(self, turn: Turn, args: str) -> str:
        """`/list [name] [add a, b | done N|words | clear]`."""
        words = args.split()
        verbs = ("add", "done", "clear", "check")
        at = next((i for i, w in enumerate(words) if w.lower() in verbs), None)
        name = " ".join(words[:at] if at is not None else words) or None
        try:
            list_name(name)
        except ListError as exc:
            return str(exc)
        if at is None:
            return await self.show(turn, name)
        verb, rest = words[at].lower(), " ".join(words[at + 1 :])
        if verb == "add":
            return await self.add(turn, name, rest.split(",")) if rest.strip() else LIST_USAGE
        if verb in ("done", "check"):
            return await self.check_off(turn, name, rest) if rest.strip() else LIST_USAGE
        return await self.clear(turn, name) if not rest.strip() else LIST_USAGE
