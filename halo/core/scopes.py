"""Scope ids → scopes, derived in one place from the family config.

`telegram:<chat id>` is a member's DM when the chat id is their user id (Telegram DMs share
the user's id), the parents or family group when halo.yaml names it, and an untrusted
group otherwise. `web:<member>` and `cli:<member>` are that member's private scopes.

`discord:<id>` is a work channel when `work.discord_channel_ids` lists the id, and otherwise
a DM named by the *user's* id, as on Telegram — not by Discord's DM channel id, which halo
cannot know before the person first writes and which the config never names. So a member's
Discord DM follows from `discord_user_id` alone (a pairing welcome or a parent's alert can
reach it), and the Discord adapter maps the user id to the DM channel when it sends. Any
other guild channel never becomes a scope: the adapter stays silent there.
"""

from __future__ import annotations

from config.family import Family
from halo.core.envelope import Scope


class UnknownScopeError(ValueError):
    pass


def resolve_scope(family: Family, scope_id: str) -> Scope:
    platform, sep, chat = scope_id.partition(":")
    if not sep or not chat:
        raise UnknownScopeError(f"{scope_id!r} is not a scope id (expected <platform>:<chat id>)")
    if platform in ("web", "cli"):
        return Scope(scope_id, "dm", owner_id=chat, configured=family.member(chat) is not None)
    if platform == "home":
        return Scope(scope_id, "home")
    try:
        chat_id = int(chat)
    except ValueError:
        raise UnknownScopeError(f"{scope_id!r}: a {platform} chat id is a number") from None
    if platform == "telegram":
        if chat_id == family.parents_group.telegram_chat_id:
            return Scope(scope_id, "parents_group")
        if chat_id == family.family_group.telegram_chat_id:
            return Scope(scope_id, "family_group")
        if chat_id > 0:  # private chats have positive ids equal to the user's id
            owner = family.by_telegram(chat_id)
            return Scope(scope_id, "dm", owner_id=owner.id if owner else None, configured=owner is not None)
        return Scope(scope_id, "parents_group", configured=False)  # an unconfigured group
    if platform == "discord":
        if chat_id in family.work.discord_channel_ids:
            return Scope(scope_id, "work_channel")
        owner = family.by_discord(chat_id)  # a DM is named by the user id (see above)
        return Scope(scope_id, "dm", owner_id=owner.id if owner else None, configured=owner is not None)
    raise UnknownScopeError(f"{scope_id!r}: unknown platform {platform!r}")


def member_scopes(family: Family) -> list[Scope]:
    """Every scope the config names: each member's DMs, the groups, the work channels."""
    found: list[Scope] = []
    for m in family.members:
        found.append(Scope(f"web:{m.id}", "dm", owner_id=m.id))
        if m.telegram_user_id is not None:
            found.append(Scope(f"telegram:{m.telegram_user_id}", "dm", owner_id=m.id))
        if m.discord_user_id is not None:
            found.append(Scope(f"discord:{m.discord_user_id}", "dm", owner_id=m.id))
    if family.parents_group.telegram_chat_id is not None:
        found.append(Scope(f"telegram:{family.parents_group.telegram_chat_id}", "parents_group"))
    if family.family_group.telegram_chat_id is not None:
        found.append(Scope(f"telegram:{family.family_group.telegram_chat_id}", "family_group"))
    found.extend(Scope(f"discord:{c}", "work_channel") for c in family.work.discord_channel_ids)
    return found


def parents_group_scope(family: Family) -> Scope | None:
    """The configured parents group, where shared things go; None when halo.yaml names none."""
    chat_id = family.parents_group.telegram_chat_id
    return None if chat_id is None else Scope(f"telegram:{chat_id}", "parents_group")
