"""The adapter port: the whole contract between halo and a platform adapter.

An adapter imports this module, its platform library and its own config section — nothing
else of halo. (An adapter serving HTTP on the admin server also finds here the one JSON
body reader, `read_json` / `BadBody`, from halo/http_body.py.) The composition root hands
each adapter what it needs (an `Inbound` for a chat platform, an `Observations` sink for
home events) and registers it with halo's one `Delivery`. Written in the style of the
Agents SDK's `Session`: small protocols whose docstrings are the contract.

Inbound (adapter → halo):
- a chat message becomes an `Envelope` (speaker and scope resolved by `Inbound`) and is
  handed to `Inbound.handle`; someone joining or leaving a chat is reported with
  `Inbound.joined` / `Inbound.left`;
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

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from halo.core.envelope import (
    Attachment,
    Envelope,
    Platform,
    Scope,
    ScopeType,
    Speaker,
    VoiceNote,
    attachment_kind,
)
from halo.http_body import BadBody, read_json, takes_body
from transcripts.text import clean_text

if TYPE_CHECKING:
    from aiohttp import web
    from sqlalchemy import MetaData
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "Adapter",
    "AdminRoutes",
    "Attachment",
    "Audit",
    "BadBody",
    "Envelope",
    "Inbound",
    "Observation",
    "Observations",
    "Outbound",
    "OutboundKind",
    "Platform",
    "PresenceCheck",
    "Progress",
    "Scope",
    "ScopeType",
    "SendFailed",
    "Speaker",
    "Tables",
    "TurnOutcome",
    "VoiceNote",
    "attachment_kind",
    "clean_text",
    "read_json",
    "takes_body",
]

OutboundKind = Literal["reply", "notice", "proactive", "alert", "digest"]


@dataclass(frozen=True, slots=True)
class Outbound:
    """One message halo sends to one scope.

    `id` is the outbox row's id and stays the same across retries: an adapter whose platform
    can deduplicate (a nonce, an idempotency key) should pass it along. `reply_to` is the
    platform message id this answers, when there is one. `audience` says who will read it
    (for an alert to a parent's chat app, the text never quotes a child; that is decided
    before it gets here — an adapter sends `text` as it is).
    """

    id: str
    scope_id: str
    text: str
    kind: OutboundKind = "reply"
    reply_to: str | None = None
    in_reply_to_envelope: str | None = None  # the envelope id a reply answers (web/cli match on it)
    created_at: datetime | None = None


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
        """A piece of streamed reply text (web SSE, terminal). The whole reply still comes
        through `Adapter.send`."""
        ...


class Inbound(Protocol):
    """What halo offers a chat adapter: the only way a message gets in."""

    def speaker(
        self,
        platform: Platform,
        user_id: str,
        *,
        display_name: str | None = None,
        username: str | None = None,
        is_bot: bool = False,
    ) -> Speaker:
        """The platform user as halo knows them: a member when the family config names that
        platform id (and `is_bot` is false), else an unknown speaker."""
        ...

    def scope(self, platform: Platform, chat_id: str) -> Scope:
        """The scope for a platform chat, resolved from the family config (a DM, the parents
        group, a work channel, or an unconfigured group)."""
        ...

    def answers_everything(self, scope: Scope) -> bool:
        """True when halo answers every message in this group, not only when addressed."""
        ...

    async def handle(self, envelope: Envelope, progress: Progress | None = None) -> TurnOutcome:
        """Run one message through the pipeline. Returns once the message is in the
        transcript and its reply (if any) is durably queued for delivery. Messages of one
        scope are handled one at a time, in order; different scopes run concurrently."""
        ...

    async def joined(self, scope_id: str, speaker: Speaker) -> None:
        """Someone joined a group chat (a guarded group may stop because of it)."""
        ...

    async def left(self, scope_id: str, platform_user_id: str) -> None:
        """Someone left a group chat."""
        ...

    async def reconnected(self, platform: Platform) -> None:
        """The platform answers again after an outage: what waits in halo's outbox for it is
        tried now rather than at its next retry."""
        ...

    async def notice(self, scope_id: str, text: str, *, reply_to: str | None = None) -> None:
        """Queue a notice of the adapter's own (a group halo is not configured for) in halo's
        outbox, the one way anything is sent: it comes back through the adapter's `send`."""
        ...

    def http_speaker(self, request: web.BaseRequest) -> Speaker | None:
        """Whom an HTTP request (the web chat) speaks for: the member whose `web_token` it
        carries, or the local owner for a parent signed in to the dashboard (its cookie), else
        None. Being on this machine is no credential: a family computer is shared."""
        ...

    def commands(self) -> Sequence[tuple[str, str, str]]:
        """The deterministic commands as (name, usage, summary), for a platform's command menu."""
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
    webhook). Each route documents itself for the OpenAPI document."""

    def admin_routes(self) -> Sequence[web.RouteDef]: ...

    def openapi_paths(self) -> dict[str, Any]:
        """The routes' part of the server's /openapi.json (`paths` entries)."""
        ...


class Tables(Protocol):
    """An adapter's own tables in halo.db (Telegram's processed updates and its reply queue).
    The adapter declares its `MetaData`; every table gets a `family_id` column it need not
    write. On SQLite tables are created on first use; on PostgreSQL they must be in a migration
    (halo/storage/migrations). Writes are durable when the block exits and are serialised
    across halo."""

    def write(self, metadata: MetaData) -> AbstractAsyncContextManager[AsyncConnection]: ...

    def read(self, metadata: MetaData) -> AbstractAsyncContextManager[AsyncConnection]: ...


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
