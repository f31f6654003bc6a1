"""The platform-neutral message: who wrote it, where, about whom."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from config.family import Member
from config.paths import scope_hash
from transcripts.text import clean_text

Platform = Literal["telegram", "discord", "web", "cli", "mqtt"]
ScopeType = Literal["dm", "parents_group", "family_group", "work_channel", "home"]


@dataclass(frozen=True, slots=True)
class Scope:
    """One conversation context; `id` is `<platform>:<chat id>`."""

    id: str
    type: ScopeType
    owner_id: str | None = None  # the member whose DM this is
    configured: bool = True  # a group chat is untrusted until halo.yaml names it
    suspended: bool = False  # a guarded group halo stopped using (halo/family/groups.py)

    @property
    def hash(self) -> str:
        return scope_hash(self.id)

    @property
    def platform(self) -> str:
        return self.id.split(":", 1)[0]


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who wrote a message. `member` is None for a sender the family config does not know."""

    platform_user_id: str
    member: Member | None = None
    display_name: str | None = None
    username: str | None = None

    @property
    def known(self) -> bool:
        return self.member is not None

    @property
    def label(self) -> str:
        if self.member:
            return self.member.id
        return f"unknown:{self.platform_user_id}"


@dataclass(frozen=True, slots=True)
class VoiceNote:
    """A voice note or audio file that came with a message. The adapter knows how to fetch it;
    the core decides (policy, size) before `read` downloads anything."""

    read: Callable[[], Awaitable[bytes]]
    mime: str = "audio/ogg"
    size: int | None = None  # bytes, when the platform says
    duration: int | None = None  # seconds, when the platform says


AttachmentKind = Literal["image", "document"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A photo or a document that came with a message. As with a voice note, the adapter knows
    how to fetch it and the core decides (policy, size, kind) before `read` downloads anything."""

    read: Callable[[], Awaitable[bytes]]
    kind: AttachmentKind
    mime: str
    name: str | None = None  # the file name the sender gave, for documents
    size: int | None = None  # bytes, when the platform says


def attachment_kind(mime: str) -> AttachmentKind:
    """A picture is shown to the model; anything else is a document to read."""
    return "image" if mime.startswith("image/") else "document"


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message on its way through the gateway. `target` defaults to the speaker."""

    platform: Platform
    scope: Scope
    speaker: Speaker
    text: str
    addressed: bool = True
    target: Member | None = None
    platform_message_id: str | None = None
    reply_to: str | None = None
    voice: VoiceNote | None = None  # the text is then its caption, if any, until it is transcribed
    heard: bool = False  # the text was transcribed from a voice note
    attachment: Attachment | None = None  # a photo or document; the text is then its caption
    ts: datetime = field(default_factory=lambda: datetime.now(UTC))
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        # adapters clean their input (port.clean_text); this is the net under a new one that forgets
        object.__setattr__(self, "text", clean_text(self.text))

    @property
    def target_member(self) -> Member | None:
        return self.target or self.speaker.member
