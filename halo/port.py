"""The adapter port: the whole contract between halo and a platform adapter.

An adapter imports this module, its platform library and its own config section — nothing
else of halo. (An adapter serving HTTP on the admin server also finds here the one JSON
body reader, `read_json` / `BadBody`, from halo/http_body.py.) The composition root hands
each adapter what it needs (an `Inbound` for a chat platform, an `Observations` sink for
home events) and registers it with halo's one `Delivery`. Written in the style of the
Agents SDK's `Session`: small protocols whose docstrings are the contract.

Inbound (adapter → halo), one call per platform event:
- a chat message becomes an `Incoming` — what the platform said: chat, sender, text,
  attachments, reply-to, whether it is addressed to halo — handed to `Inbound.receive`; halo
  resolves the scope and the speaker itself. A button pressed under one of halo's messages
  is a `Press` for `Inbound.press`: it carries only the `Choice`'s opaque id, and halo checks
  the presser and runs the decision as the typed command it stands for. Someone joining or leaving a chat is a
  `ChatMembership` for `Inbound.membership`. A few read-only lookups (the command menu, who an
  HTTP request speaks for) are a `Directory`;
- a home event (MQTT) becomes an `Observation` handed to `Observations.observe`.

Outbound (halo → adapter): everything halo sends — the reply to a message, a notice, a home
event, a status digest, a safety alert — is written to halo's one durable outbox
(`Delivery`, halo/outbound/delivery.py, a table in halo.db) and handed to the owning adapter's
`send` as an `Outbound`, in order per scope, retried on `SendFailed`. An adapter never sends
a reply itself: a reply's `Outbound.in_reply_to_envelope` names the envelope it answers (the
web chat completes that request with it; the terminal prints it in place). An adapter may
show platform chrome (a typing indicator, a streamed preview) through `Progress`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from halo.core.envelope import (
    Attachment,
    Platform,
    Scope,
    ScopeType,
    VoiceNote,
    attachment_kind,
)
from halo.http_body import BadBody, read_json, takes_body
from halo.http_routes import Access, ApiModel, Error, Handler, Reply, Route, Timestamp, param
from transcripts.text import clean_text

if TYPE_CHECKING:
    from aiohttp import web
    from sqlalchemy import MetaData

    from halo.db_conn import Conn

__all__ = [
    "Access",
    "Adapter",
    "AdminRoutes",
    "ApiModel",
    "Attachment",
    "Audit",
    "BadBody",
    "ChatKind",
    "ChatMembership",
    "Choice",
    "Conversations",
    "Directory",
    "Error",
    "Handler",
    "HistoryLine",
    "Inbound",
    "Incoming",
    "Menu",
    "Observation",
    "Observations",
    "Outbound",
    "OutboundKind",
    "Platform",
    "PresenceCheck",
    "Press",
    "Pressed",
    "Progress",
    "Reply",
    "Route",
    "Scope",
    "ScopeType",
    "SendFailed",
    "Sender",
    "Tables",
    "Timestamp",
    "TurnOutcome",
    "VoiceNote",
    "attachment_kind",
    "clean_text",
    "param",
    "read_json",
    "takes_body",
]

OutboundKind = Literal["reply", "notice", "proactive", "alert", "digest"]

CHOICE_ID_BYTES = 64  # Telegram's callback_data limit; Discord's custom_id allows 100


@dataclass(frozen=True, slots=True)
class Choice:
    """One button under a message that asks for a decision. `id` is opaque (the recorded ask
    and which of its options, at most 64 bytes): the adapter puts it in the button and hands
    it back in a `Press`, never the decision's text, which halo keeps."""

    label: str
    id: str


@dataclass(frozen=True, slots=True)
class Outbound:
    """One message halo sends to one scope.

    `id` is the outbox row's id and stays the same across retries: an adapter whose platform
    can deduplicate (a nonce, an idempotency key) should pass it along. `reply_to` is the
    platform message id this answers, when there is one. What the text may say (an alert to a
    parent never quotes a child) is decided before it gets here: an adapter sends `text` as it
    is, with `choices` as buttons where its platform has them.
    """

    id: str
    scope_id: str
    text: str
    kind: OutboundKind = "reply"
    reply_to: str | None = None
    in_reply_to_envelope: str | None = None  # the envelope id a reply answers (web/cli match on it)
    created_at: datetime | None = None
    choices: tuple[Choice, ...] = ()  # buttons under the message (a platform without them shows the text)


class SendFailed(Exception):
    """Raised by `Adapter.send` when a message did not go out.

    `permanent=True`: retrying cannot help (the chat is gone, the bot was blocked, the text is
    refused); the outbox records the failure and moves on. Otherwise the outbox retries with
    backoff, honouring `retry_after` seconds when the platform named one (capped by halo).
    """

    def __init__(self, reason: str, *, retry_after: float | None = None, permanent: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.permanent = permanent


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What became of a handled envelope: `text` is the reply (None: silence), `kind` why.

    The reply is already queued in the outbox (`outbox_id`) and reaches `Adapter.send`
    from there; an adapter does not send `text` itself.
    """

    text: str | None
    kind: str
    outbox_id: str | None = None
    reason: str | None = None  # why the message was refused, when it was (a web chat answers 403 with it)


class Progress(Protocol):
    """Platform chrome while a turn runs; both are optional niceties, never the reply itself."""

    async def model_started(self) -> None:
        """The model is being asked: show "typing…" until the reply is sent."""
        ...

    async def delta(self, text: str) -> None:
        """A piece of streamed reply text (web SSE, terminal, a Telegram draft): the one source
        of partial text. The whole reply still comes through `Adapter.send`. A guarded turn (a
        child's) never streams: its reply is checked whole first."""
        ...


ChatKind = Literal["private", "group"]


@dataclass(frozen=True, slots=True)
class Sender:
    """A platform user as the platform describes them. halo decides who they are: a member when
    the family config names this platform id (and `is_bot` is false), else an unknown speaker.
    For the web chat and the terminal, `id` is the member id the adapter signed in."""

    id: str
    name: str | None = None
    username: str | None = None
    is_bot: bool = False


@dataclass(frozen=True, slots=True)
class Incoming:
    """One message, as the platform said it: the adapter's whole part of a turn.

    `chat_id` is the platform's chat (for a Discord DM: the user's id, see halo/core/scopes.py);
    `addressed` says the message itself is for halo — a mention, a reply to halo, a command
    meant for it. halo resolves the scope and the speaker, and decides what counts as addressed
    there (everything in a private chat, and in a parents group set to `respond_to_all`). `id`
    becomes the envelope's id: a reply's `Outbound.in_reply_to_envelope` names it.
    """

    platform: Platform
    chat_id: str
    chat_kind: ChatKind
    sender: Sender
    text: str
    addressed: bool = False
    message_id: str | None = None
    reply_to: str | None = None
    voice: VoiceNote | None = None
    attachment: Attachment | None = None
    ts: datetime | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True, slots=True)
class ChatMembership:
    """Someone joined or left a group chat. `halo_itself`: the one who joined is halo's own
    account (the bot was added to a group)."""

    platform: Platform
    chat_id: str
    who: Sender
    joined: bool
    halo_itself: bool = False


@dataclass(frozen=True, slots=True)
class Press:
    """Someone pressed a button (`Choice`) under a message halo sent: in `chat_id`, by
    `sender`, with the choice's opaque `choice_id` as the platform handed it back."""

    platform: Platform
    chat_id: str
    chat_kind: ChatKind
    sender: Sender
    choice_id: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Pressed:
    """What became of a press: `answer` is the short note the platform shows the presser (a
    Telegram toast, an ephemeral Discord reply); `closed`: the decision is made or gone, so
    the adapter removes the buttons from that message. What the decision did is a message
    like any other, through the outbox."""

    answer: str
    closed: bool


class Inbound(Protocol):
    """What halo offers a chat adapter: the only way a message gets in. One call per platform
    event, in the style of the Agents SDK's `Session`."""

    async def receive(self, message: Incoming, progress: Progress | None = None) -> TurnOutcome:
        """Run one message through halo. Returns once the message is in the transcript and its
        reply (if any) is durably queued for delivery; it comes back through `Adapter.send`.
        Messages of one scope are handled one at a time, in order; different scopes run
        concurrently. A group halo is not configured for gets one notice (through the outbox)
        the first time halo is addressed or added there, and silence after."""
        ...

    async def press(self, press: Press) -> Pressed:
        """A button was pressed. halo finds the recorded ask by its id, resolves the presser
        and checks they may decide it (a child pressing a parents' button is refused and
        audited), then runs the decision as the typed command it stands for, through
        `receive`'s path and its policy checks. A second press, or one after the ask
        expired, changes nothing."""
        ...

    async def membership(self, change: ChatMembership) -> None:
        """Someone joined or left a group chat (a guarded group may stop because of it)."""
        ...

    async def reconnected(self, platform: Platform) -> None:
        """The platform answers again after an outage: what waits in halo's outbox for it is
        tried now rather than at its next retry."""
        ...


@dataclass(frozen=True, slots=True)
class Menu:
    """The commands a kind of chat offers: `chat_id` None is every private chat, else one group."""

    scope_type: ScopeType
    chat_id: str | None
    commands: tuple[tuple[str, str, str], ...]  # (name, usage, summary)


class Directory(Protocol):
    """Read-only lookups for an adapter that needs one outside a message: nothing here changes
    anything or lets a message in."""

    def scope(self, platform: Platform, chat_id: str) -> Scope:
        """The scope of a platform chat, resolved from the family config (the Discord adapter
        asks whether a scope it is to send to is a DM)."""
        ...

    def commands(self, scope_type: ScopeType | None = None) -> Sequence[tuple[str, str, str]]:
        """The deterministic commands as (name, usage, summary), for a platform's command menu:
        those offered in a kind of chat, or every one (None)."""
        ...

    def menus(self, platform: Platform) -> Sequence[Menu]:
        """The command menus of a platform's chats: one for its private chats (`chat_id` None)
        and one for each group the family config names, each with the commands that kind of
        chat supports."""
        ...

    async def suggest(
        self, platform: Platform, chat_id: str, what: Literal["project", "task"], typed: str
    ) -> Sequence[tuple[str, str]]:
        """Autocomplete for a slash command's option in a chat, as (shown, value): the
        projects, or the open tasks, of that work channel. Empty elsewhere."""
        ...

    def web_member(self, request: web.BaseRequest) -> Sender | None:
        """Whom an HTTP request (the web chat) speaks for: the member whose `web_token` it
        carries, or the local owner for a parent signed in to the dashboard (its cookie), else
        None. Being on this machine is no credential: a family computer is shared. The
        `Sender.id` is the member id."""
        ...


@dataclass(frozen=True, slots=True)
class HistoryLine:
    """One message of a conversation as its member saw it: what they said, or halo's answer."""

    cursor: int  # hand it back as `before` for the messages before this one
    role: Literal["user", "assistant"]
    text: str
    ts: datetime
    when: str  # the time as halo writes it everywhere (the family's zone)
    kind: str = "message"  # or, for what halo said on its own, the outbox's kind (proactive, alert, …)
    outbox_id: str | None = None  # that message's id, as the web inbox has it


class Conversations(Protocol):
    """A conversation read back, for a page that shows it again (the web chat after a reload)."""

    async def earlier(self, scope_id: str, before: int | None, limit: int) -> list[HistoryLine]:
        """Up to `limit` of the scope's messages, oldest first: the newest ones, or those before
        the `cursor` a previous page gave. What the member said, what halo answered and what it
        sent them on its own; never the notes halo keeps for itself."""
        ...

    def say_time(self, at: datetime) -> str:
        """`at` as halo writes a time everywhere: one format, in the family's time zone."""
        ...


@runtime_checkable
class Adapter(Protocol):
    """A platform adapter: translates between one platform and envelopes, knows nothing of
    the model, the policy or the stores.

    `start` returns once the adapter is running in the background (polling, listening);
    `stop` stops taking messages and finishes in-flight sends; `status` is shown by
    `/status`, so it holds JSON values only (times as ISO 8601 strings) and no secrets.
    `send` delivers one message to one of the adapter's scopes (`platform` is the scope
    id's prefix) or raises `SendFailed`; it is called by the outbox only, one message per
    scope at a time.
    """

    platform: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> dict[str, Any]: ...

    async def send(self, message: Outbound) -> None: ...


@runtime_checkable
class LiveReplies(Protocol):
    """Optional: an adapter where a person waits on a live request for the reply (the web chat's
    HTTP request, the terminal). Such a reply is handed over first and recorded in the outbox as
    sent afterwards, in a batch: its text is durable in the transcript already, and a failed
    hand-over is queued like any other message."""

    def awaits_reply(self, envelope_id: str) -> bool:
        """Whether a request is waiting, now, for the reply to this envelope."""
        ...


@runtime_checkable
class PresenceCheck(Protocol):
    """Optional: an adapter that can tell whether a user is still in a group chat."""

    async def still_in_chat(self, scope_id: str, platform_user_id: str) -> bool | None:
        """True/False, or None when the platform cannot tell."""
        ...


@runtime_checkable
class AdminRoutes(Protocol):
    """Optional: an adapter that serves HTTP routes on halo's admin server (the web chat, a
    webhook). Each is a `Route` record, as the admin API's own are: the server registers it
    behind the check its `access` names, and `/openapi.json` is derived from the records."""

    def routes(self) -> Sequence[Route]: ...


class Tables(Protocol):
    """An adapter's own tables in halo.db (Telegram's processed updates and its reply queue).
    The adapter declares its `MetaData`; every table gets a `family_id` column it need not
    write or filter on (first in a natural key: two families' bots may share update ids). On
    SQLite tables are created on first use; on PostgreSQL they must be in a migration
    (halo/storage/migrations). Writes are durable when the block exits and are serialised
    across halo."""

    def write(self, metadata: MetaData) -> AbstractAsyncContextManager[Conn]: ...

    def read(self, metadata: MetaData) -> AbstractAsyncContextManager[Conn]: ...


class Audit(Protocol):
    """The audit log (`logs/events.jsonl`): an adapter records what a parent may need to see
    (a message the platform refused for good). Never pass a secret."""

    def write(self, kind: str, **fields: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class Observation:
    """One home event, as the MQTT adapter understood it.

    `topic` is the MQTT topic; `payload` the decoded JSON object (a plain-text payload is
    `{"state": text}`); `source` names the format ("zigbee2mqtt", "frigate", "owntracks",
    "homeassistant", "halo"); `entity` is the device, camera, person or entity id; `event_id`
    identifies one real-world event across redeliveries and updates (a Frigate event id, a
    payload hash), so a duplicate never makes a second message.
    """

    topic: str
    source: str
    entity: str
    payload: dict[str, Any]
    received_at: datetime
    retained: bool = False
    event_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


class Observations(Protocol):
    """What halo offers the home-events adapter."""

    async def observe(self, observation: Observation) -> None:
        """Store the observation, update the entity's current state, and run the home rules.
        A retained (replayed) observation updates state and never raises a message."""
        ...
