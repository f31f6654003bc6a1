"""The family schema: who the members are, which chats are trusted, and the children's age profiles."""

from __future__ import annotations

from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from config.safety import AgeGroup, AgeProfile, SafetyConfig
from config.schedule import parse_schedule

Role = Literal["parent", "child", "colleague"]

_STRICT = ConfigDict(extra="forbid", frozen=True)


def secret_bytes(text: str) -> bytes:
    """A secret as bytes for a constant-time comparison; never raises, whatever a client sent."""
    return text.encode("utf-8", "surrogatepass")


class Member(BaseModel):
    """A person known to the family config. `id` is the stable slug used everywhere."""

    model_config = _STRICT

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    name: str = Field(min_length=1)
    role: Role
    age_group: AgeGroup | None = None
    parental_visibility: bool = False
    telegram_user_id: int | None = None
    discord_user_id: int | None = None
    web_token: SecretStr | None = None

    @model_validator(mode="after")
    def _child_fields(self) -> Member:
        if self.role != "child" and self.age_group is not None:
            raise ValueError(f"age_group is only for children, but {self.id!r} is a {self.role}")
        if self.role == "child" and self.age_group is None:
            object.__setattr__(self, "age_group", "young_child")
        return self

    @property
    def is_parent(self) -> bool:
        return self.role == "parent"


class FamilyInfo(BaseModel):
    model_config = _STRICT
    name: str = "Family"
    timezone: str = Field(default="UTC", description="an IANA zone; quiet hours are read in it")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, zone: str) -> str:

        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{zone!r} is not a time zone name like Europe/London") from None
        return zone


class ParentsGroup(BaseModel):
    model_config = _STRICT
    telegram_chat_id: int | None = None
    respond_to_all: bool = False


class FamilyGroup(BaseModel):
    model_config = _STRICT
    telegram_chat_id: int | None = None


class Work(BaseModel):
    model_config = _STRICT
    discord_channel_ids: list[int] = Field(default_factory=list)
    digest: str | None = Field(
        default=None,
        description='e.g. "mon-fri 17:00" (family timezone): the day\'s task changes, posted to the work channels',
    )

    @field_validator("digest")
    @classmethod
    def _digest_schedule(cls, value: str | None) -> str | None:
        if value is not None:
            parse_schedule(value)  # raises ValueError with a hint
        return value


class Family(BaseModel):
    """The people part of halo.yaml, validated as a whole (unique ids and platform ids)."""

    model_config = _STRICT

    family: FamilyInfo = Field(default_factory=FamilyInfo)
    members: list[Member] = Field(default_factory=list)
    owner: str | None = Field(default=None, description="member id of the local owner (loopback web chat, `halo chat`)")
    parents_group: ParentsGroup = Field(default_factory=ParentsGroup)
    family_group: FamilyGroup = Field(default_factory=FamilyGroup)
    work: Work = Field(default_factory=Work)
    safety: SafetyConfig = Field(default_factory=SafetyConfig)

    @field_validator("members")
    @classmethod
    def _unique(cls, members: list[Member]) -> list[Member]:
        for attr in ("id", "telegram_user_id", "discord_user_id"):
            seen: set[object] = set()
            for m in members:
                value = getattr(m, attr)
                if value is None:
                    continue
                if value in seen:
                    raise ValueError(f"two members share {attr} {value!r}")
                seen.add(value)
        tokens = [m.web_token.get_secret_value() for m in members if m.web_token]
        if len(tokens) != len(set(tokens)):
            raise ValueError("two members share a web_token")
        return members

    @model_validator(mode="after")
    def _owner_exists(self) -> Family:
        if self.owner is not None and self.member(self.owner) is None:
            raise ValueError(f"owner {self.owner!r} is not a member id")
        return self

    def member(self, member_id: str) -> Member | None:
        return next((m for m in self.members if m.id == member_id), None)

    def by_telegram(self, user_id: int) -> Member | None:
        return next((m for m in self.members if m.telegram_user_id == user_id), None)

    def by_discord(self, user_id: int) -> Member | None:
        return next((m for m in self.members if m.discord_user_id == user_id), None)

    def by_web_token(self, token: str) -> Member | None:
        """The member whose web_token this is, compared in constant time. Any text is a wrong
        token at worst, never an error: compared as bytes (`compare_digest` refuses a str that
        is not ASCII), and a header's undecodable bytes (lone surrogates) pass through."""
        import hmac

        given = secret_bytes(token)
        for m in self.members:
            if m.web_token and hmac.compare_digest(secret_bytes(m.web_token.get_secret_value()), given):
                return m
        return None

    @property
    def parents(self) -> list[Member]:
        return [m for m in self.members if m.role == "parent"]

    @property
    def children(self) -> list[Member]:
        return [m for m in self.members if m.role == "child"]

    def profile_of(self, member: Member) -> AgeProfile | None:
        """A child's age profile; None for adults, whose turns are not guarded."""
        if member.role != "child" or member.age_group is None:
            return None
        return self.safety.profile(member.age_group)

    @property
    def local_owner(self) -> Member | None:
        if self.owner:
            return self.member(self.owner)
        return next(iter(self.parents), None)
