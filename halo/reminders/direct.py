"""Where a member gets a direct message: the one rule, in one place.

Telegram DM where they have one and halo runs Telegram, else a Discord DM likewise, else the
web inbox (`web:<member id>`, shown on the /chat page). The same rule home messages use
(branch h23-home builds a shared resolver); swap this for it when both are merged.
"""

from __future__ import annotations

from collections.abc import Callable

from config.family import Member
from halo.pipeline.envelope import Scope


def direct_message_scope(member: Member, can_send: Callable[[str], bool]) -> Scope:
    if member.telegram_user_id is not None and can_send(scope_id := f"telegram:{member.telegram_user_id}"):
        return Scope(scope_id, "dm", owner_id=member.id)
    if member.discord_user_id is not None and can_send(scope_id := f"discord:{member.discord_user_id}"):
        return Scope(scope_id, "dm", owner_id=member.id)
    return Scope(f"web:{member.id}", "dm", owner_id=member.id)
