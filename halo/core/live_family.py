"""The family halo answers for right now, one object every part reads it from.

The family changes while halo runs: a parent approves a pairing request (halo.yaml gains a
member), or halo.yaml is edited. Parts that need the people (delivery, alerts, home rules,
the work digest) are handed `LiveFamily.current` and call it each time; `replace` swaps the
family for all of them at once. The policy engine decides for the same family, so it holds
the family and `replace` rebuilds it: the two can never disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config.family import Family
    from policy import PolicyEngine


class LiveFamily:
    """The current `Family`: read it with `current()`, swap it with `replace()`."""

    def __init__(self, policy: PolicyEngine) -> None:
        self._policy = policy

    def current(self) -> Family:
        return self._policy.family

    def replace(self, family: Family) -> None:
        """Answer for `family` from now on (the policy engine is rebuilt for it first)."""
        self._policy.rebuild(family)
