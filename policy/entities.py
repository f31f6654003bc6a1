"""What policy knows of people and scopes, as Cedar entities (namespace `Halo`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.family import Family, Member
from config.safety import AgeProfile

GROUP_TYPES = frozenset({"parents_group", "family_group", "work_channel"})


@dataclass(frozen=True, slots=True)
class ScopeRef:
    """What policy needs to know of a scope. Build one with `scope_ref` to get `configured` right."""

    id: str  # "telegram:123", "web:mom"
    type: str  # dm | parents_group | family_group | work_channel | home
    owner_id: str | None = None  # for a dm: the member whose DM it is
    configured: bool = True  # groups: False until halo.yaml names the chat
    suspended: bool = False  # a group halo stopped using until a parent's /resume


@dataclass(frozen=True, slots=True)
class SystemPrincipal:
    """halo itself: the sender of proactive home events (and what `admin` administers)."""

    id: str = "home"

    @property
    def label(self) -> str:
        return f"system:{self.id}"


SYSTEM = SystemPrincipal()


def scope_ref(family: Family, scope_id: str, scope_type: str, owner_id: str | None = None) -> ScopeRef:
    """A ScopeRef whose `configured` says whether halo.yaml names this group chat."""
    configured = True
    if scope_type == "parents_group":
        configured = _names(scope_id, "telegram", [family.parents_group.telegram_chat_id])
    elif scope_type == "family_group":
        configured = _names(scope_id, "telegram", [family.family_group.telegram_chat_id])
    elif scope_type == "work_channel":
        configured = _names(scope_id, "discord", family.work.discord_channel_ids)
    return ScopeRef(scope_id, scope_type, owner_id, configured)


def _names(scope_id: str, platform: str, chat_ids: list[int] | list[int | None]) -> bool:
    return scope_id in {f"{platform}:{chat_id}" for chat_id in chat_ids if chat_id is not None}


def uid(entity_type: str, entity_id: str) -> dict[str, str]:
    return {"type": f"Halo::{entity_type}", "id": entity_id}


def member_entity(member: Member, profile: AgeProfile | None = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "role": member.role,
        "age_group": member.age_group or "none",
        "parental_visibility": member.parental_visibility,
    }
    if profile is not None:
        attrs["profile"] = {
            "name": member.age_group,
            "tool_classes": list(profile.tool_classes),
            "max_reply_chars": profile.max_reply_chars,
            "blocked_topics": list(profile.blocked_topics),
            "notify_parents_on_medium": profile.notify_parents_on_medium,
        }
    return {"uid": uid("Member", member.id), "attrs": attrs, "parents": []}


def base_entities(family: Family) -> list[dict[str, Any]]:
    """Every member (children with their age profile), and halo itself: the part of the entity
    set that changes only with the config."""
    system = {"uid": uid("System", SYSTEM.id), "attrs": {}, "parents": []}
    return [*(member_entity(m, family.profile_of(m)) for m in family.members), system]


def scope_entity(scope: ScopeRef, member_ids: frozenset[str]) -> dict[str, Any]:
    """A scope as an entity. An owner the config does not know is dropped: the DM then has no owner."""
    attrs: dict[str, Any] = {"scope_type": scope.type, "configured": scope.configured}
    if scope.suspended:
        attrs["suspended"] = True
    if scope.owner_id is not None and scope.owner_id in member_ids:
        attrs["owner"] = {"__entity": uid("Member", scope.owner_id)}
    return {"uid": uid("Scope", scope.id), "attrs": attrs, "parents": []}
