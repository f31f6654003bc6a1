"""The copies of a decision's buttons an adapter sent, so that once one press decides the ask
every copy loses them (each parent's DM had one), not only the pressed message.

Kept in memory, the newest asks only: a copy sent before a restart keeps its buttons until it
is pressed, and is then told the ask is decided (halo/outbound/asks.py).
"""

from __future__ import annotations

from collections import OrderedDict

from halo.port import Choice

ASKS_KEPT = 1000


class OfferedCopies:
    """ask id → the (chat, message) ids its buttons went to, newest asks last."""

    def __init__(self, keep: int = ASKS_KEPT) -> None:
        self.keep = keep
        self._copies: OrderedDict[str, list[tuple[int, int]]] = OrderedDict()

    def sent(self, choices: tuple[Choice, ...], chat_id: int, message_id: int) -> None:
        for ask_id in {choice.id.partition(".")[0] for choice in choices}:
            self._copies.setdefault(ask_id, []).append((chat_id, message_id))
            self._copies.move_to_end(ask_id)
        while len(self._copies) > self.keep:
            self._copies.popitem(last=False)

    def decided(self, choice_id: str) -> list[tuple[int, int]]:
        """The copies of the ask `choice_id` belongs to, forgotten from now on."""
        return self._copies.pop(choice_id.partition(".")[0], [])
