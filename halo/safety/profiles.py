"""Which age profile a turn runs under, and a member's effective profile for people to read.

A child's turn runs under their own profile. The family group runs under the strictest
profile of the family's children whoever speaks, because every child in it reads the reply.
Everyone else's turns have no profile and no guardrail cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.family import Family, Member
from config.safety import TOOL_CLASSES, AgeGroup, AgeProfile
from config.settings import LLMSettings
from halo.core.envelope import Envelope, Scope
from policy import PolicyEngine


@dataclass(frozen=True, slots=True)
class TurnProfile:
    """The limits one turn runs under. `age_group` picks the wording of halo's own replies."""

    age_group: AgeGroup
    profile: AgeProfile
    child: Member | None  # the speaker, when a child is speaking
    group: bool = False  # the family group: the profile is the strictest of its children


def strictest(profiles: list[tuple[AgeGroup, AgeProfile]]) -> tuple[AgeGroup, AgeProfile]:
    """One profile as strict as all of them: shortest replies, every blocked topic, only the
    tool classes all allow, the youngest's tone and model, parents told if any says so."""
    profiles = sorted(profiles, key=lambda gp: _age_rank(gp[0]))
    youngest_group, youngest = profiles[0]
    allowed = set(TOOL_CLASSES).intersection(*(p.tool_classes for _, p in profiles))
    merged = youngest.model_copy(
        update={
            "tool_classes": tuple(c for c in TOOL_CLASSES if c in allowed),
            "max_reply_chars": min(p.max_reply_chars for _, p in profiles),
            "blocked_topics": tuple(dict.fromkeys(t for _, p in profiles for t in p.blocked_topics)),
            "notify_parents_on_medium": any(p.notify_parents_on_medium for _, p in profiles),
        }
    )
    return youngest_group, merged


def _age_rank(group: AgeGroup) -> int:
    return 0 if group == "young_child" else 1


def turn_profile(family: Family, envelope: Envelope) -> TurnProfile | None:
    """The profile a turn runs under, or None for an unguarded (adult) turn."""
    speaker = envelope.speaker.member
    child = speaker if speaker is not None and speaker.role == "child" else None
    if envelope.scope.type == "family_group":
        children = [(c.age_group, p) for c in family.children if c.age_group and (p := family.profile_of(c))]
        if not children:
            return None
        group, profile = strictest(children)
        return TurnProfile(group, profile, child, group=True)
    if child is None or child.age_group is None:
        return None
    child_profile = family.profile_of(child)
    return TurnProfile(child.age_group, child_profile, child) if child_profile else None


def model_name(profile: AgeProfile, llm: LLMSettings) -> str | None:
    """`llm.models[<profile.model>]`, else `llm.model`; None when no provider is configured."""
    if llm.provider == "none":
        return None
    return llm.models.get(profile.model, llm.model)


def child_dm(member: Member) -> Scope:
    """The scope whose read_transcript decision stands for "may parents see this child's words"."""
    return Scope(f"web:{member.id}", "dm", owner_id=member.id)


def parents_may_read(policy: PolicyEngine, child: Member, parent: Member, *, audit: bool) -> bool:
    decision = policy.decide("read_transcript", principal=parent, resource=child_dm(child), audit=audit)
    return decision.allowed


def effective_profile(policy: PolicyEngine, member: Member, llm: LLMSettings | None = None) -> dict[str, Any]:
    """A member's effective safety profile as plain data: `/whoami`, `/policy/status`, the dashboard."""
    family = policy.family
    profile = family.profile_of(member)
    if profile is None:
        return {"member": member.id, "role": member.role, "guarded": False}
    readers = [p.id for p in family.parents if parents_may_read(policy, member, p, audit=False)]
    return {
        "member": member.id,
        "role": member.role,
        "guarded": True,
        "age_group": member.age_group,
        "model_key": profile.model,
        "model": model_name(profile, llm) if llm is not None else None,
        "tool_classes": list(profile.tool_classes),
        "max_reply_chars": profile.max_reply_chars,
        "blocked_topics": list(profile.blocked_topics),
        "tone": profile.tone,
        "notify_parents_on_medium": profile.notify_parents_on_medium,
        "notify_parents_on_high": True,
        "parental_visibility": member.parental_visibility,
        "parents_who_may_read_transcript": readers,
    }
