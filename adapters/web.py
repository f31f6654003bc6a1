"""Web chat: a page at GET /chat and POST /api/chat (JSON, or SSE when asked).

The member is the one whose `web_token` is sent as a Bearer token; with the dashboard's
session cookie, the local owner. No credential, no chat, from anywhere. The scope is `web:<member id>`.

The reply comes back through halo's outbox like any other message: `send` completes the
request waiting for it (matched on the envelope id). What halo says on its own (a notice, a
safety alert) has no request to answer and goes into the member's web inbox (a table in
halo.db), read with GET /api/chat/inbox.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from aiohttp import web
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, select

from halo.port import BadBody, Directory, Inbound, Incoming, Outbound, Tables, clean_text, read_json, takes_body

MAX_TEXT_CHARS = 8000
REPLY_WITHIN = 60.0  # the outbox hands a web reply over at its first attempt; this is a safety net
INBOX_LIMIT = 50

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


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class WebChatAdapter:
    """The web chat. Implements `halo.port.Adapter` and `AdminRoutes`; the reply to a chat
    request comes back in its HTTP response (or SSE stream)."""

    platform = "web"

    def __init__(self, inbound: Inbound, directory: Directory, tables: Tables) -> None:
        self.inbound = inbound
        self.directory = directory
        self.tables = tables
        self.messages = 0
        self._waiting: dict[str, asyncio.Future[str]] = {}  # envelope id → its request's reply

    async def start(self) -> None:  # served by the admin server; nothing of its own to start
        return None

    async def stop(self) -> None:
        return None

    def status(self) -> dict[str, Any]:
        return {"connected": True, "messages": self.messages, "path": "/chat"}

    def openapi_paths(self) -> dict[str, Any]:
        """The web chat's part of the server's /openapi.json."""
        return openapi_paths()

    def admin_routes(self) -> list[web.RouteDef]:
        return [web.get("/chat", self.page), web.post("/api/chat", self.chat), web.get("/api/chat/inbox", self.inbox)]

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
            return _error(401, "send Authorization: Bearer <your web_token> (or sign in with `halo dashboard`)")
        scope_id = f"web:{sender.id}"
        async with self.tables.read(metadata) as conn:
            rows = (
                await conn.execute(
                    select(inbox_table)
                    .where(inbox_table.c.scope_id == scope_id)
                    .order_by(inbox_table.c.seq.desc())
                    .limit(INBOX_LIMIT)
                )
            ).all()
        messages = [
            {"id": r.id, "kind": r.kind, "text": r.text, "ts": _aware(r.created).isoformat()} for r in reversed(rows)
        ]
        return web.json_response({"scope_id": scope_id, "messages": messages})

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
            return _error(401, "send Authorization: Bearer <your web_token> (or sign in with `halo dashboard`)")
        try:
            body = await read_json(request, '{"text": "hello"}')
        except BadBody as exc:
            return exc.response()
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return _error(400, '"text" must be a non-empty string')
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
        return web.json_response({"reply": text, "scope_id": f"web:{sender.id}"})

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


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)  # SQLite drops the zone


def openapi_paths() -> dict[str, Any]:
    """The web chat's part of the server's /openapi.json (OpenAPI 3.1: JSON Schema 2020-12)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    return {
        "/api/chat/inbox": {
            "get": {
                "summary": "What halo said to this member on its own (notices, alerts), oldest first",
                "x-access": "member",
                "security": [{"memberToken": []}, {"dashboardSession": []}],
                "tags": ["web chat"],
                "responses": {
                    "200": {
                        "description": "the member's web inbox",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["scope_id", "messages"],
                                    "properties": {
                                        "scope_id": {"type": "string"},
                                        "messages": {
                                            "type": "array",
                                            "items": {
                                                "type": "object",
                                                "required": ["id", "kind", "text", "ts"],
                                                "properties": {
                                                    "id": {"type": "string"},
                                                    "kind": {"type": "string"},
                                                    "text": {"type": "string"},
                                                    "ts": {"type": "string", "format": "date-time"},
                                                },
                                            },
                                        },
                                    },
                                }
                            }
                        },
                    },
                    "401": {"description": "no member: send a web_token, or sign in", "content": error},
                },
            }
        },
        "/chat": {
            "get": {
                "summary": "The web chat page",
                "x-access": "anyone",
                "security": [],
                "tags": ["web chat"],
                "responses": {
                    "200": {
                        "description": "the page",
                        "content": {"text/html": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/api/chat": {
            "post": {
                "summary": "Send a message as a member; the reply comes whole (JSON) or streamed (SSE)",
                "description": "The member is the one whose web_token is the Bearer token; with the dashboard's "
                "session cookie, the local owner. No credential, no chat, from anywhere. `Accept: "
                "text/event-stream` streams `delta` events, then `done`.",
                "x-access": "member",
                "security": [{"memberToken": []}, {"dashboardSession": []}],
                "tags": ["web chat"],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["text"],
                                "properties": {
                                    "text": {
                                        "type": "string",
                                        "minLength": 1,
                                        "maxLength": MAX_TEXT_CHARS,
                                        "pattern": r"\S",
                                    }
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": {
                        "description": "the reply",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["reply", "scope_id"],
                                    "properties": {
                                        "reply": {"type": ["string", "null"]},
                                        "scope_id": {"type": "string"},
                                    },
                                }
                            },
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    "400": {"description": "not JSON, or no text", "content": error},
                    "415": {"description": "the body is not declared application/json", "content": error},
                    "401": {
                        "description": "no member: send a web_token, or sign in to the dashboard",
                        "content": error,
                    },
                    "403": {"description": "the policy refuses this member here", "content": error},
                    "413": {"description": "the message is too long", "content": error},
                },
            }
        },
    }
