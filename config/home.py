"""The `home` section of halo.yaml: quiet hours and the home rules that turn MQTT events into
messages. Everything a rule says is checked here, at start-up, so a typo stops halo with the
key that is wrong instead of silently never firing."""

from __future__ import annotations

import re
from datetime import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_STRICT = ConfigDict(extra="forbid", frozen=True)

TARGET_KEYWORDS = frozenset({"parents", "parents_group", "family_group"})
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_FIELD_PATH = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")


def _clock(value: Any) -> Any:
    """ "22:00" → time(22, 0)."""
    if isinstance(value, str):
        match = re.fullmatch(r"(\d{1,2}):(\d{2})", value.strip())
        if not match or int(match[1]) > 23 or int(match[2]) > 59:
            raise ValueError(f"{value!r} is not a time of day like 22:00")
        return time(int(match[1]), int(match[2]))
    return value


class QuietHours(BaseModel):
    """From `start` to `end` (local time, may cross midnight) non-urgent messages wait."""

    model_config = _STRICT
    start: time
    end: time

    _clocks = field_validator("start", "end", mode="before")(_clock)

    def contains(self, local: time) -> bool:
        if self.start == self.end:
            return False
        if self.start < self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end


class When(BaseModel):
    """The condition: a topic (MQTT wildcards + and #), a dotted field and one comparison."""

    model_config = _STRICT
    topic: str = Field(min_length=1)
    field: str = "state"
    equals: Any = None
    in_: list[Any] | None = Field(default=None, alias="in")
    above: float | None = None
    below: float | None = None
    for_minutes: float | None = Field(default=None, gt=0)

    @field_validator("topic")
    @classmethod
    def _topic(cls, topic: str) -> str:
        levels = topic.split("/")
        for i, level in enumerate(levels):
            if "#" in level and (level != "#" or i != len(levels) - 1):
                raise ValueError(f"{topic!r}: '#' may only be a whole last level")
            if "+" in level and level != "+":
                raise ValueError(f"{topic!r}: '+' must be a whole level")
        return topic

    @field_validator("field")
    @classmethod
    def _field(cls, path: str) -> str:
        if not _FIELD_PATH.match(path):
            raise ValueError(f"{path!r} is not a dotted field path like after.label")
        return path

    @model_validator(mode="before")
    @classmethod
    def _one_comparison(cls, data: Any) -> Any:
        if isinstance(data, dict):
            given = [k for k in ("equals", "in", "above", "below") if k in data]
            if not given:
                raise ValueError("needs one of equals, in, above, below")
            if len(given) > 1 and set(given) != {"above", "below"}:
                raise ValueError(f"give one comparison, not {', '.join(given)} (above and below may pair)")
        return data

    @property
    def comparison(self) -> str:
        if self.in_ is not None:
            return "in"
        if self.above is not None or self.below is not None:
            return "range"
        return "equals"


class HomeRule(BaseModel):
    model_config = _STRICT
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
    when: When
    say: str = Field(min_length=1)
    to: list[str] = Field(min_length=1)
    urgent: bool = False
    cooldown_minutes: float = Field(default=0, ge=0)

    @field_validator("say")
    @classmethod
    def _template(cls, say: str) -> str:
        if say.count("{") != say.count("}"):
            raise ValueError(f"unbalanced braces in {say!r}")
        for name in _PLACEHOLDER.findall(say):
            if not _FIELD_PATH.match(name):
                raise ValueError(f"{{{name}}} is not a field name like {{after.camera}}")
        return say

    @field_validator("to")
    @classmethod
    def _targets(cls, targets: list[str]) -> list[str]:
        for target in targets:
            if target in TARGET_KEYWORDS or ":" in target:
                continue
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,31}", target):
                raise ValueError(f"{target!r} is not parents, parents_group, family_group, a member id or a scope id")
        return targets

    def member_targets(self) -> list[str]:
        return [t for t in self.to if t not in TARGET_KEYWORDS and ":" not in t]


class HomeSettings(BaseModel):
    model_config = _STRICT
    quiet_hours: QuietHours | None = None
    member_quiet_hours: dict[str, QuietHours] = Field(
        default_factory=dict, description="per member id; overrides quiet_hours for their DMs"
    )
    rules: list[HomeRule] = Field(default_factory=list)
    keep_observations: int = Field(default=20_000, ge=100, description="older observations are pruned")
    burst_limit: int = Field(default=5, ge=1, description="more messages than this from one rule …")
    burst_minutes: float = Field(default=5, gt=0, description="… within this many minutes become one summary")

    @field_validator("rules")
    @classmethod
    def _unique_ids(cls, rules: list[HomeRule]) -> list[HomeRule]:
        seen: set[str] = set()
        for rule in rules:
            if rule.id in seen:
                raise ValueError(f"two rules share the id {rule.id!r}")
            seen.add(rule.id)
        return rules
