"""Web chat: a page at GET /chat and POST /api/chat (JSON, or SSE when asked).

The member is the one whose `web_token` is sent as a Bearer token; with the dashboard's
session cookie, the local owner. No credential, no chat, from anywhere. The scope is `web:<member id>`.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from aiohttp import web

from halo.port import BadBody, Envelope, Inbound, Outbound, clean_text, read_json

MAX_TEXT_CHARS = 8000


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class WebChatAdapter:
    """The web chat. Implements `halo.port.Adapter` and `AdminRoutes`; the reply to a chat
    request comes back in its HTTP response (or SSE stream)."""

    platform = "web"

    def __init__(self, inbound: Inbound) -> None:
        self.inbound = inbound
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

    def admin_routes(self) -> list[web.RouteDef]:
        return [web.get("/chat", self.page), web.post("/api/chat", self.chat)]

    async def send(self, message: Outbound) -> None:
        """A message halo starts for a web scope has no open request to answer; it is in the
        scope's transcript, which the member reads through the admin API."""
        return None

    async def page(self, request: web.Request) -> web.Response:
        html = resources.files("adapters").joinpath("web_chat.html").read_text(encoding="utf-8")
        return web.Response(text=html, content_type="text/html")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        speaker = self.inbound.http_speaker(request)
        if speaker is None:
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

        envelope = Envelope(
            platform="web",
            scope=self.inbound.scope("web", speaker.platform_user_id),
            speaker=speaker,
            text=text.strip(),
        )
        self.messages += 1
        if "text/event-stream" in request.headers.get("Accept", ""):
            return await self._stream(request, envelope)
        reply = await self.inbound.handle(envelope)
        if reply.kind == "denied":
            return _error(403, reply.reason or "not allowed")
        return web.json_response({"reply": reply.text, "scope_id": envelope.scope.id})

    async def _stream(self, request: web.Request, envelope: Envelope) -> web.StreamResponse:
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
        reply = await self.inbound.handle(envelope, stream)
        if reply.kind == "denied" and not prepared:
            return _error(403, reply.reason or "not allowed")
        if not stream.sent_any and reply.text:
            await send("delta", {"text": reply.text})  # commands and errors arrive whole
        await send("done", {"reply": reply.text, "scope_id": envelope.scope.id})
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
                                        "reply": {"type": "string", "nullable": True},
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
