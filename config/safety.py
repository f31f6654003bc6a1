"""Age profiles: the limits halo enforces, in code, on a child's turns (halo.yaml `safety:`).

A family overrides only what it wants: `safety.profiles.young_child.max_reply_chars: 400`
keeps every other young_child default. Adults have no profile; their turns run unguarded.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

AgeGroup = Literal["young_child", "adolescent"]
AGE_GROUPS: tuple[AgeGroup, ...] = ("young_child", "adolescent")
TOOL_CLASSES = ("internal", "private", "outward")

_STRICT = ConfigDict(extra="forbid", frozen=True)

DEFAULT_EMERGENCY = (
    "If you or someone else is in danger right now, call your local emergency number "
    "(112 in Europe, 911 in North America, 999 in the UK) or ask a grown-up to call."
)


class AgeProfile(BaseModel):
    """What halo allows one age group. Every field is enforced in code, not only prompted."""

    model_config = _STRICT

    model: str = Field(description="key into llm.models; falls back to llm.model when absent there")
    tool_classes: tuple[str, ...] = Field(description="tool classes allowed (internal, private, outward)")
    max_reply_chars: int = Field(ge=80, le=20000, description="longer replies are cut on a sentence boundary")
    blocked_topics: tuple[str, ...] = Field(description="topics deflected both ways (see halo/safety/topics.py)")
    tone: str = Field(description="how to talk with this age group; a section of the instructions")
    notify_parents_on_medium: bool = Field(description="medium-risk messages tell the parents too")

    @field_validator("tool_classes")
    @classmethod
    def _known_classes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - set(TOOL_CLASSES))
        if unknown:
            raise ValueError(f"unknown tool class {unknown}; expected some of {list(TOOL_CLASSES)}")
        return value

    @field_validator("blocked_topics")
    @classmethod
    def _lower_topics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.strip().lower() for t in value if t.strip()))


DEFAULT_PROFILES: dict[AgeGroup, dict[str, Any]] = {
    "young_child": {
        "model": "young_child",
        "tool_classes": ("internal", "private"),
        "max_reply_chars": 600,
        "blocked_topics": ("violence", "weapons", "drugs", "alcohol", "gambling", "dating", "horror"),
        "tone": (
            "You are talking with a young child. Use short sentences and simple, friendly words. "
            "Be warm, patient and encouraging. Never frighten them. If something sounds worrying, "
            "gently suggest they talk to a parent or another grown-up they trust."
        ),
        "notify_parents_on_medium": True,
    },
    "adolescent": {
        "model": "adolescent",
        "tool_classes": ("internal", "private", "outward"),
        "max_reply_chars": 1500,
        "blocked_topics": ("weapons", "drugs", "gambling"),
        "tone": (
            "You are talking with a teenager. Be respectful and direct, never condescending, and "
            "respect their privacy. For anything about safety, health or feeling low, be supportive "
            "and point them to a parent, another trusted adult or a professional."
        ),
        "notify_parents_on_medium": False,
    },
}


class SafetyConfig(BaseModel):
    """`safety:` in halo.yaml: the age profiles and how risk is classified."""

    model_config = _STRICT

    classifier: Literal["auto", "off"] = Field(
        default="auto",
        description="auto: a cheap-model classification (llm.cheap_model, else llm.model) on top of the "
        "deterministic floor whenever a provider is configured; off: the floor only",
    )
    emergency_resources: str = Field(default=DEFAULT_EMERGENCY, min_length=1)
    topics: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="extra or replacement keyword lists per blocked topic"
    )
    profiles: dict[AgeGroup, AgeProfile] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _merge_defaults(cls, data: Any) -> Any:
        """Each profile is the default for its age group with the family's keys laid over it."""
        if not isinstance(data, dict):
            return data
        given = data.get("profiles") or {}
        if not isinstance(given, dict):
            return data
        unknown = sorted(str(g) for g in given if g not in DEFAULT_PROFILES)
        if unknown:
            raise ValueError(f"unknown age group {unknown}; profiles are {list(AGE_GROUPS)}")
        merged: dict[str, Any] = {}
        for group, override in given.items():
            # a non-mapping is passed on as it is, so validation names what is wrong with it
            merged[group] = {**DEFAULT_PROFILES[group], **override} if isinstance(override, dict) else override
        for group, default in DEFAULT_PROFILES.items():
            merged.setdefault(group, dict(default))
        return {**data, "profiles": merged}

    def profile(self, age_group: AgeGroup) -> AgeProfile:
        return self.profiles[age_group]
