"""Web chat: a page at GET /chat and POST /api/chat (JSON, or SSE when asked).

The member is the one whose `web_token` is sent as a Bearer token; from loopback with no
token, the local owner. The scope is `web:<member id>`.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from aiohttp import web

from config.family import Member
from halo.access import bearer_token, is_local_request
from halo.envelope import Envelope, Speaker
from halo.gateway import Gateway
from halo.port import clean_text
from halo.scopes import resolve_scope

MAX_TEXT_CHARS = 8000


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class WebChatAdapter:
    name = "web"

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.messages = 0

    async def start(self) -> None:  # served by the admin server; nothing of its own to start
        return None

    async def stop(self) -> None:
        return None

    def status(self) -> dict[str, Any]:
        return {"connected": True, "messages": self.messages, "path": "/chat"}

    def openapi_paths(self) -> dict[str, Any]:
        """The web chat's part of the server's /openapi.json."""
        return openapi_paths()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/chat", self.page)
        app.router.add_post("/api/chat", self.chat)

    async def page(self, request: web.Request) -> web.Response:
        html = resources.files("adapters").joinpath("web_chat.html").read_text(encoding="utf-8")
        return web.Response(text=html, content_type="text/html")

    def _member(self, request: web.Request) -> Member | None:
        family = self.gateway.services.family
        token = bearer_token(request)
        if token:
            return family.by_web_token(token)
        return family.local_owner if is_local_request(request) else None

    async def chat(self, request: web.Request) -> web.StreamResponse:
        member = self._member(request)
        if member is None:
            return _error(401, "send Authorization: Bearer <your web_token> (or chat from this machine)")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, 'the body must be JSON like {"text": "hello"}')
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return _error(400, '"text" must be a non-empty string')
        text = clean_text(text)  # JSON can carry a lone surrogate, which no store can encode
        if len(text) > MAX_TEXT_CHARS:
            return _error(413, f"the message is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")

        family = self.gateway.services.family
        envelope = Envelope(
            platform="web",
            scope=resolve_scope(family, f"web:{member.id}"),
            speaker=Speaker(platform_user_id=member.id, member=member, display_name=member.name),
            text=text.strip(),
        )
        self.messages += 1
        if "text/event-stream" in request.headers.get("Accept", ""):
            return await self._stream(request, envelope)
        reply = await self.gateway.handle(envelope)
        if reply.kind == "denied":
            return _error(403, reply.decision.reason if reply.decision else "not allowed")
        return web.json_response({"reply": reply.text, "scope_id": reply.scope_id})

    async def _stream(self, request: web.Request, envelope: Envelope) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        prepared = False
        sent_any = False

        async def send(event: str, data: dict[str, Any]) -> None:
            nonlocal prepared
            if not prepared:
                await response.prepare(request)
                prepared = True
            await response.write(f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode())

        async def on_delta(delta: str) -> None:
            nonlocal sent_any
            sent_any = True
            await send("delta", {"text": delta})

        reply = await self.gateway.handle(envelope, on_delta=on_delta)
        if reply.kind == "denied" and not prepared:
            return _error(403, reply.decision.reason if reply.decision else "not allowed")
        if not sent_any and reply.text:
            await send("delta", {"text": reply.text})  # commands and errors arrive whole
        await send("done", {"reply": reply.text, "scope_id": reply.scope_id})
        await response.write_eof()
        return response


def openapi_paths() -> dict[str, Any]:
    """The web chat's part of the server's /openapi.json."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    return {
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
                "description": "The member is the one whose web_token is the Bearer token; from this machine with "
                "no token, the local owner. `Accept: text/event-stream` streams `delta` events, "
                "then `done`.",
                "x-access": "member",
                "security": [{}, {"memberToken": []}],
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
                                        "reply": {"type": "string", "nullable": True},
                                        "scope_id": {"type": "string"},
                                    },
                                }
                            },
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    "400": {"description": "not JSON, or no text", "content": error},
                    "401": {"description": "no member: send a web_token, or chat from this machine", "content": error},
                    "403": {"description": "the policy refuses this member here", "content": error},
                    "413": {"description": "the message is too long", "content": error},
                },
            }
        },
    }
