"""Where a member gets a direct message from halo: one rule for everything halo starts on its
own for one person (a home event, a reminder).

Their Telegram DM when they have a Telegram account and halo runs Telegram; otherwise their
Discord DM on the same terms; otherwise their web inbox (`web:<member id>`), which every member
has. One scope, not all of them: a parent on Telegram gets the leak once, on their phone, and a
parent who only uses the web chat still gets it. Whether the message may go there at all is
the policy's to decide (`receive_proactive`), after this.
"""

from __future__ import annotations

from collections.abc import Callable

from config.family import Family
from halo.core.envelope import Scope
from halo.core.scopes import member_scopes

# chat apps, best first; the web inbox is the fallback that is always there
PREFERRED_PLATFORMS = ("telegram", "discord")


class DirectMessages:
    """`scope_of(member_id)`: the one DM scope a direct message to that member goes to.
    `family` is the live family; `can_send(scope_id)` says whether a platform's adapter runs
    (`Delivery.can_send`)."""

    def __init__(self, family: Callable[[], Family], can_send: Callable[[str], bool]) -> None:
        self._family = family
        self._can_send = can_send

    def scope_of(self, member_id: str) -> Scope | None:
        """None when no member has this id."""
        family = self._family()
        if family.member(member_id) is None:
            return None
        dms = {s.platform: s for s in member_scopes(family) if s.type == "dm" and s.owner_id == member_id}
        for platform in PREFERRED_PLATFORMS:
            scope = dms.get(platform)
            if scope is not None and self._can_send(scope.id):
                return scope
        return dms["web"]
