"""A local Anthropic Messages API server that the real anthropic SDK (and any-llm on top of it) talks to."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar

from aiohttp import web

from tests.fakes.llm_server import (
    JSON,
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    SseEvent,
    argument_deltas,
    count_tokens,
    strings_in,
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

    Usage is reported as Anthropic does: the tool schemas, the system prompt and the messages
    are input; with a `cache_control` breakpoint, the prefix up to the marked block (in the
    order tools → system → messages) is read from the model's cache when a request marked the
    same prefix before (`cache_read_input_tokens`), else written to it
    (`cache_creation_input_tokens`), and `input_tokens` is only what comes after the last
    breakpoint. A prefix shorter than `cache_min_tokens` is not cached (Anthropic's minimum is
    1024 tokens for Sonnet and Opus); nothing is cached without a breakpoint.
    """

    MODEL_PATHS: ClassVar[frozenset[str]] = frozenset({"/v1/messages"})
    PROMPT_FIELDS: ClassVar[tuple[str, ...]] = ("system", "messages")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cache_min_tokens = 1024
        self._cached_prefixes: dict[str, set[str]] = {}  # per model: the cached prefixes' text
        self.reported_usage: list[JSON] = []  # the usage of each answered Messages call, in order

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
        usage = {**self._input_usage(body), "output_tokens": count_tokens(reply.text) + len(reply.tool_calls)}
        self.reported_usage.append(usage)
        return {
            "id": self._new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": self._content_blocks(reply) if content is None else content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }

    def _input_usage(self, body: JSON) -> JSON:
        """input_tokens, cache_read_input_tokens and cache_creation_input_tokens of one request."""
        blocks = _blocks(body)
        texts = [text for text, _ in blocks]
        total = sum(count_tokens(text) for text in texts)
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        cached = self._cached_prefixes.setdefault(str(body.get("model")), set())

        def prefix(end: int) -> str:
            return "\x00".join(texts[: end + 1])

        def tokens(end: int) -> int:
            return sum(count_tokens(text) for text in texts[: end + 1])

        read = next((tokens(i) for i in reversed(marks) if prefix(i) in cached), 0)
        written = 0
        if marks and tokens(marks[-1]) >= self.cache_min_tokens:
            written = tokens(marks[-1]) - read
            cached.update(prefix(i) for i in marks if tokens(i) >= self.cache_min_tokens)
        return {
            "input_tokens": total - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
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


def _blocks(body: JSON) -> list[tuple[str, bool]]:
    """A Messages request's input as Anthropic caches it: each tool, each system block, each
    message's content blocks, in order, with whether the block carries a cache breakpoint."""
    blocks: list[tuple[str, bool]] = []
    for tool in body.get("tools") or []:
        schema = {key: value for key, value in tool.items() if key != "cache_control"}
        blocks.append((json.dumps(schema), "cache_control" in tool))
    system = body.get("system")
    for block in [{"text": system}] if isinstance(system, str) else system or []:
        blocks.append(("\n".join(strings_in(block)), "cache_control" in block))
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in [{"text": content}] if isinstance(content, str) else content or []:
            blocks.append(("\n".join(strings_in(block)), isinstance(block, dict) and "cache_control" in block))
    return blocks
