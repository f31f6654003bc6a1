"""Web chat: a page at GET /chat and POST /api/chat (JSON, or SSE when asked).

The member is the one whose `web_token` is sent as a Bearer token; with the dashboard's
session cookie (the one-time link `halo serve` and `halo dashboard` print), the family's
owner: that cookie is no one member's, and whoever can mint it can read halo.yaml. No
credential, no chat, from anywhere; the page then says how to get one. The scope is
`web:<member id>`.

The reply comes back through halo's outbox like any other message: `send` completes the
request waiting for it (matched on the envelope id). What halo says on its own (a notice, a
home alert, a reminder, an approval question) has no request to answer and goes into the
member's web inbox (a table in halo.db), read with GET /api/chat/inbox; the page polls it
with `after=<seq>` and shows each message as it arrives.

Reopened, the page shows the conversation so far: GET /api/chat/history reads the newest
messages of the member's scope back from its transcript (`halo.port.Conversations`), and
`before=<cursor>` the ones before them as the member scrolls up. Every time on the page is
written as halo writes times everywhere (`Conversations.say_time`).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from importlib import resources
from typing import Annotated, Any

from aiohttp import web
from pydantic import Field
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, select

from halo.port import (
    ApiModel,
    BadBody,
    Conversations,
    Directory,
    Inbound,
    Incoming,
    Outbound,
    Reply,
    Route,
    Tables,
    Timestamp,
    clean_text,
    param,
    read_json,
    takes_body,
)

MAX_TEXT_CHARS = 8000
NO_MEMBER = (
    "no member: send Authorization: Bearer <your web_token>, or sign in with the one-time link "
    "`halo serve` or `halo dashboard` prints"
)
REPLY_WITHIN = 60.0  # the outbox hands a web reply over at its first attempt; this is a safety net
INBOX_LIMIT = 50
HISTORY_PAGE = 30
HISTORY_MAX = 200

metadata = MetaData()
inbox_table = Table(
    "web_inbox",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),  # the outbox id: a retry never adds it twice
    Column("scope_id", String(200), nullable=False, index=True),
    Column("kind", String(16), nullable=False),
    Column("text", Text, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
)


CHAT_DESCRIPTION = (
    "The member is the one whose web_token is the Bearer token; with the dashboard's session cookie, the "
    "local owner (`owner` in halo.yaml). No credential, no chat, from anywhere. `Accept: text/event-stream` "
    "streams `delta` events, then `done`."
)
AFTER = param(
    "after",
    "query",
    {"type": "integer", "minimum": 0},
    "only messages after this `seq` (the newest one the client has)",
)


class ChatMessage(ApiModel):
    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS, pattern=r"\S")]


class ChatReply(ApiModel):
    reply: str | None = Field(description="null when halo stays silent")
    scope_id: str


BEFORE = param(
    "before",
    "query",
    {"type": "integer", "minimum": 0},
    "only messages before this `cursor` (the oldest one the client has); absent: the newest",
)
LIMIT = param("limit", "query", {"type": "integer", "minimum": 1, "maximum": HISTORY_MAX, "default": HISTORY_PAGE})


class InboxMessage(ApiModel):
    seq: int = Field(description="increases with each message: poll with `after=<the last seq>`")
    id: str
    kind: str
    text: str
    ts: Timestamp
    when: str = Field(description="the time as halo writes it everywhere, in the family's time zone")


class ChatLine(ApiModel):
    cursor: int = Field(description="pass as `before` for the messages before this one")
    role: str = Field(description="user: the member; assistant: halo")
    kind: str = Field(description="message, or for what halo said on its own the outbox's kind (proactive, alert, …)")
    id: str | None = Field(description="for what halo said on its own, its id in the web inbox")
    text: str
    ts: Timestamp
    when: str = Field(description="the time as halo writes it everywhere, in the family's time zone")


class History(ApiModel):
    member: str
    scope_id: str
    messages: list[ChatLine] = Field(description="oldest first")
    more: bool = Field(description="whether there are messages before these")


class Inbox(ApiModel):
    member: str = Field(description="whom this caller chats as: the web_token's member, or for the dashboard the owner")
    name: str
    scope_id: str
    messages: list[InboxMessage]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class WebChatAdapter:
    """The web chat. Implements `halo.port.Adapter` and `AdminRoutes`; the reply to a chat
    request comes back in its HTTP response (or SSE stream)."""

    platform = "web"

    def __init__(
        self, inbound: Inbound, directory: Directory, tables: Tables, conversations: Conversations | None = None
    ) -> None:
        self.inbound = inbound
        self.directory = directory
        self.tables = tables
        self.conversations = conversations
        self.messages = 0
        self._waiting: dict[str, asyncio.Future[str]] = {}  # envelope id → its request's reply

    async def start(self) -> None:  # served by the admin server; nothing of its own to start
        return None

    async def stop(self) -> None:
        return None

    def status(self) -> dict[str, Any]:
        return {"connected": True, "messages": self.messages, "path": "/chat"}

    def routes(self) -> list[Route]:
        """The page and the two JSON routes, documented in the server's /openapi.json."""
        return [
            Route(
                "GET",
                "/chat",
                self.page,
                "anyone",
                summary="The web chat page",
                description="The page itself holds nothing of the family: it signs in with the dashboard's "
                "session cookie or a member's web_token, and says how to get one when it has neither.",
                responses={200: Reply("the page", html=True)},
                tag="web chat",
            ),
            Route(
                "POST",
                "/api/chat",
                self.chat,
                "member",
                summary="Send a message as a member; the reply comes whole (JSON) or streamed (SSE)",
                description=CHAT_DESCRIPTION,
                body=ChatMessage,
                responses={
                    200: Reply("the reply", ChatReply, event_stream=True),
                    400: "Not JSON, or no text",
                    403: "The policy refuses this member here",
                    413: "The message is too long",
                    415: "The body is not declared application/json",
                },
                tag="web chat",
            ),
            Route(
                "GET",
                "/api/chat/inbox",
                self.inbox,
                "member",
                summary="What halo said to this member on its own (notices, reminders, alerts), oldest first",
                description="`after` (the `seq` of the last message seen) returns only newer ones: the chat "
                "page polls with it.",
                parameters=[AFTER],
                responses={200: Reply("the member's web inbox", Inbox), 400: "`after` is not a whole number"},
                tag="web chat",
            ),
            Route(
                "GET",
                "/api/chat/history",
                self.history,
                "member",
                summary="The member's conversation so far, newest page first: what the page shows when reopened",
                description="Read back from the transcript of `web:<member>`: what the member said, what halo "
                "answered and what it sent on its own. `before` (the oldest `cursor` the page has) pages back.",
                parameters=[BEFORE, LIMIT],
                responses={200: Reply("a page of the conversation", History), 400: "`before` or `limit` is wrong"},
                tag="web chat",
            ),
        ]

    def awaits_reply(self, envelope_id: str) -> bool:
        waiting = self._waiting.get(envelope_id)
        return waiting is not None and not waiting.done()

    async def send(self, message: Outbound) -> None:
        """Complete the request this reply answers; anything else goes into the web inbox."""
        waiting = self._waiting.get(message.in_reply_to_envelope or "")
        if waiting is not None:
            if not waiting.done():
                waiting.set_result(message.text)
            return
        async with self.tables.write(metadata) as conn:
            known = await conn.execute(select(inbox_table.c.id).where(inbox_table.c.id == message.id))
            if known.first() is None:
                await conn.execute(
                    inbox_table.insert().values(
                        id=message.id,
                        scope_id=message.scope_id,
                        kind=message.kind,
                        text=message.text,
                        created=message.created_at or datetime.now(UTC),
                    )
                )

    async def inbox(self, request: web.Request) -> web.Response:
        """The member's web inbox: what halo said on its own, oldest first."""
        sender = self.directory.web_member(request)
        if sender is None:
            return _error(401, NO_MEMBER)
        after_text = request.query.get("after", "0")
        if not after_text.isascii() or not after_text.isdigit() or len(after_text) > 18:
            return _error(400, "`after` must be a whole number: the seq of the last message seen")
        scope_id = f"web:{sender.id}"
        async with self.tables.read(metadata) as conn:
            rows = (
                await conn.execute(
                    select(inbox_table)
                    .where(inbox_table.c.scope_id == scope_id, inbox_table.c.seq > int(after_text))
                    .order_by(inbox_table.c.seq.desc())
                    .limit(INBOX_LIMIT)
                )
            ).all()
        messages = [
            InboxMessage(
                seq=r.seq,
                id=r.id,
                kind=r.kind,
                text=r.text,
                ts=_aware(r.created).isoformat(),
                when=self._when(r.created),
            )
            for r in reversed(rows)
        ]
        return web.json_response(
            Inbox(member=sender.id, name=sender.name or sender.id, scope_id=scope_id, messages=messages).model_dump(
                mode="json"
            )
        )

    async def history(self, request: web.Request) -> web.Response:
        """A page of the member's conversation, oldest first, read back from its transcript."""
        sender = self.directory.web_member(request)
        if sender is None:
            return _error(401, NO_MEMBER)
        try:
            before, limit = _whole(request.query.get("before")), _whole(request.query.get("limit"))
        except ValueError:
            limit = 0
        if limit is not None and not 1 <= limit <= HISTORY_MAX:
            return _error(400, f"`before` is a cursor from an earlier page; `limit` a whole number up to {HISTORY_MAX}")
        scope_id, wanted = f"web:{sender.id}", limit or HISTORY_PAGE
        found = await self.conversations.earlier(scope_id, before, wanted + 1) if self.conversations else []
        lines = [
            ChatLine(
                cursor=h.cursor, role=h.role, kind=h.kind, id=h.outbox_id, text=h.text, ts=h.ts.isoformat(), when=h.when
            )
            for h in found[-wanted:]
        ]
        page = History(member=sender.id, scope_id=scope_id, messages=lines, more=len(found) > wanted)
        return web.json_response(page.model_dump(mode="json"))

    def _when(self, at: datetime) -> str:
        aware = _aware(at)
        return self.conversations.say_time(aware) if self.conversations else aware.isoformat()

    async def _handle(self, message: Incoming, progress: Any = None) -> tuple[Any, str | None]:
        """Run the message through halo and wait for its reply to come back through `send`."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[message.id] = future
        try:
            outcome = await self.inbound.receive(message, progress)
            text = await asyncio.wait_for(future, REPLY_WITHIN) if outcome.text else None
        finally:
            self._waiting.pop(message.id, None)
        return outcome, text

    async def page(self, request: web.Request) -> web.Response:
        html = resources.files("adapters").joinpath("web_chat.html").read_text(encoding="utf-8")
        return web.Response(text=html, content_type="text/html")

    @takes_body
    async def chat(self, request: web.Request) -> web.StreamResponse:
        sender = self.directory.web_member(request)
        if sender is None:
            return _error(401, NO_MEMBER)
        try:
            body = await read_json(request, '{"text": "hello"}')
        except BadBody as exc:
            return exc.response()
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return _error(400, '"text" must be a non-empty string')
        if unknown := sorted(set(body) - set(ChatMessage.model_fields)):
            return _error(400, f'unknown field(s) {", ".join(unknown)}: the body is {{"text": "…"}}')
        text = clean_text(text)  # JSON can carry a lone surrogate, which no store can encode
        if len(text) > MAX_TEXT_CHARS:
            return _error(413, f"the message is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")

        message = Incoming(platform="web", chat_id=sender.id, chat_kind="private", sender=sender, text=text.strip())
        self.messages += 1
        if "text/event-stream" in request.headers.get("Accept", ""):
            return await self._stream(request, message)
        reply, text = await self._handle(message)
        if reply.kind == "denied":
            return _error(403, reply.reason or "not allowed")
        return web.json_response(ChatReply(reply=text, scope_id=f"web:{sender.id}").model_dump(mode="json"))

    async def _stream(self, request: web.Request, message: Incoming) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        prepared = False

        async def send(event: str, data: dict[str, Any]) -> None:
            nonlocal prepared
            if not prepared:
                await response.prepare(request)
                prepared = True
            await response.write(f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode())

        class Stream:
            sent_any = False

            async def model_started(self) -> None:
                return None

            async def delta(self, text: str) -> None:
                self.sent_any = True
                await send("delta", {"text": text})

        stream = Stream()
        reply, text = await self._handle(message, stream)
        if reply.kind == "denied" and not prepared:
            return _error(403, reply.reason or "not allowed")
        if not stream.sent_any and text:
            await send("delta", {"text": text})  # commands and errors arrive whole
        await send("done", {"reply": text, "scope_id": f"web:{message.chat_id}"})
        await response.write_eof()
        return response


def _whole(text: str | None) -> int | None:
    """A query's whole number, or None when absent; ValueError when it is not one."""
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise ValueError(text)
    return int(text)


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)  # SQLite drops the zone
