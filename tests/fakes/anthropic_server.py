"""A local Anthropic Messages API server that the real anthropic SDK (and any-llm on top of it) talks to."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import ClassVar

from aiohttp import web

from tests.fakes.llm_server import (
    JSON,
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    SseEvent,
    argument_deltas,
    count_tokens,
    text_deltas,
)

_ANTHROPIC_ERRORS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeAnthropic(ScriptedModelServer):
    """Anthropic's POST /v1/messages, scripted with the same API as `FakeOpenAI`.

    `base_url` has no /v1: the anthropic SDK appends /v1/messages itself.
    """

    MODEL_PATHS: ClassVar[frozenset[str]] = frozenset({"/v1/messages"})
    PROMPT_FIELDS: ClassVar[tuple[str, ...]] = ("system", "messages")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def messages_requests(self) -> list[RecordedRequest]:
        return self.model_requests

    def _routes(self) -> Iterable[web.RouteDef]:
        return [web.post("/v1/messages", self._messages)]

    def _error_body(self, status: int, message: str) -> JSON:
        kind = _ANTHROPIC_ERRORS.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._serve_model_call(request, self._message_json, self._message_events)

    def _content_blocks(self, reply: Reply) -> list[JSON]:
        blocks: list[JSON] = [{"type": "text", "text": reply.text}] if reply.text else []
        blocks += [
            {
                "type": "tool_use",
                "id": call.id or self._new_id("toolu"),
                "name": call.name,
                "input": call.arguments,
            }
            for call in reply.tool_calls
        ]
        return blocks

    def _message_json(self, reply: Reply, body: JSON, content: list[JSON] | None = None) -> JSON:
        return {
            "id": self._new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": self._content_blocks(reply) if content is None else content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": count_tokens(self._prompt_of(body)),
                "output_tokens": count_tokens(reply.text) + len(reply.tool_calls),
            },
        }

    def _message_events(self, reply: Reply, body: JSON) -> list[SseEvent]:
        """The event sequence of a streamed Messages call, as Anthropic sends it."""
        blocks = self._content_blocks(reply)
        final = self._message_json(reply, body, blocks)
        started = {
            **final,
            "content": [],
            "stop_reason": None,
            "usage": {**final["usage"], "output_tokens": 1},
        }
        events: list[JSON] = [{"type": "message_start", "message": started}, {"type": "ping"}]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
                deltas = [{"type": "text_delta", "text": piece} for piece in text_deltas(block["text"])]
            else:
                events.append({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}})
                deltas = [
                    {"type": "input_json_delta", "partial_json": piece}
                    for piece in argument_deltas(json.dumps(block["input"]))
                ]
            events += [{"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas]
            events.append({"type": "content_block_stop", "index": index})
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": final["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": final["usage"]["output_tokens"]},
            }
        )
        events.append({"type": "message_stop"})
        return [(event["type"], json.dumps(event)) for event in events]
