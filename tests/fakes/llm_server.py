"""A local OpenAI-compatible model server that the real openai and Agents SDKs talk to in tests.

`ScriptedModelServer` is the part every fake model API shares: a queue of scripted replies,
a record of every request, start/stop on 127.0.0.1 with a random port (in the test's own
event loop or in a background thread for subprocess tests), and the HTTP plumbing for
errors, delays, SSE streams and broken connections. `FakeOpenAI` adds the OpenAI wire
format: Chat Completions, Responses and Embeddings.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import itertools
import json
import math
import random
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from aiohttp import web

JSON = dict[str, Any]
SseEvent = tuple[str | None, str]
"""One server-sent event: the optional `event:` name and the `data:` payload."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call the scripted model makes; `id` is generated when not given."""

    name: str
    arguments: JSON
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted model turn.

    A reply is text and/or tool calls, or an HTTP error when `status` is not 200. `delay`
    is waited before answering; `hold`, when given, is an event the test sets to let the
    answer go (order without the clock); `broken` sends part of the answer and then drops
    the connection; `garbage` answers 200 with a body that is not the API's format (plain
    text, or a stream of non-JSON events). Streamed: `pace` seconds pass between events (a
    model writing at a speed, for benchmarks), and with `midway` set the stream stops after
    its first half of events until the test sets it (a draft seen half way, without the clock).
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    status: int = 200
    error_message: str | None = None
    retry_after: float | None = None
    delay: float = 0.0
    hold: asyncio.Event | None = None
    broken: bool = False
    garbage: bool = False
    pace: float = 0.0
    midway: asyncio.Event | None = None


GARBAGE = "<html><body>502 Bad Gateway (from a proxy that answers 200)</body></html>"
HANG_SECONDS = 3600.0  # longer than any test: the client has to give up


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as the fake received it; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    intercepted: bool = False  # answered by an interceptor, not from the script
    at: float = dataclasses.field(default_factory=time.monotonic)  # when it arrived (benchmarks)


Responder = Callable[[JSON], Reply | str]
Interceptor = Callable[[JSON], Reply | str | None]
"""Answers the requests it recognises (None: not mine), before the scripted queue."""

# Keys in a prompt that carry structure, not words the model reads.
_PROMPT_METADATA_KEYS = frozenset(
    {"role", "type", "id", "call_id", "tool_call_id", "tool_use_id", "name", "status", "cache_control"}
)


class ScriptedModelServer:
    """Scripting, recording and lifecycle shared by the fake model APIs.

    Replies are consumed in the order they were scripted; with an empty queue the
    `responder` (if any) answers, else `default_reply`. Subclasses declare their routes,
    which requests are model calls, where the prompt is in a request body, and how an
    error body looks.
    """

    MODEL_PATHS: ClassVar[frozenset[str]]
    PROMPT_FIELDS: ClassVar[tuple[str, ...]]

    def __init__(self, *, default_reply: str = "ok", responder: Responder | None = None) -> None:
        self.default_reply = default_reply
        self.responder = responder
        # e.g. halo's child-safety classifier (tests/conftest.py): its calls then leave the
        # scripted replies to the calls a test is about
        self.interceptors: list[Interceptor] = []
        self.requests: list[RecordedRequest] = []
        # a provider's prefix cache, simulated: each model's earlier prompts; a request reports the
        # longest prefix it shares with one of them as cached input tokens (off: always 0)
        self.prefix_cache = False
        # OpenAI's rules (`openai_cache_rules()`): nothing below 1024 tokens, then 128-token steps;
        # the defaults cache any shared prefix, to the word, as tests script it
        self.prefix_cache_min_tokens = 0
        self.prefix_cache_step = 1
        # a provider bills the tool schemas it is sent as input, ahead of the messages (and caches
        # them with the prefix); off, usage counts only the prompt's text, as the tests script it
        self.bill_tool_schemas = False
        self._seen_prompts: dict[str, list[str]] = {}
        self._queue: deque[Reply] = deque()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- scripting -------------------------------------------------------------------

    def enqueue(self, reply: Reply) -> None:
        """Queue any reply; the helpers below cover the usual cases."""
        self._queue.append(reply)

    def reply(self, text: str, *, delay: float = 0.0) -> None:
        self.enqueue(Reply(text=text, delay=delay))

    def tool_call(
        self, name: str, arguments: JSON | None = None, *, text: str = "", call_id: str | None = None
    ) -> None:
        self.enqueue(Reply(text=text, tool_calls=(ToolCall(name, arguments or {}, call_id),)))

    def tool_calls(self, *calls: ToolCall, text: str = "") -> None:
        """Several tool calls in one turn (parallel tool calling)."""
        self.enqueue(Reply(text=text, tool_calls=calls))

    def error(self, status: int, message: str | None = None, *, retry_after: float | None = None) -> None:
        """An HTTP error; a 429 carries `retry-after: 1` unless told otherwise."""
        if status == 429 and retry_after is None:
            retry_after = 1
        self.enqueue(Reply(status=status, error_message=message, retry_after=retry_after))

    def held(self, hold: asyncio.Event, text: str = "ok") -> None:
        """Answer `text` once `hold` is set: a slow turn that ends when the test says so."""
        self.enqueue(Reply(text=text, hold=hold))

    def delay(self, seconds: float, text: str = "ok") -> None:
        """Answer `text`, but only after `seconds` (for client timeouts)."""
        self.enqueue(Reply(text=text, delay=seconds))

    def hang(self) -> None:
        """Never answer (within any test's time): the client's timeout or halo's deadline must act."""
        self.enqueue(Reply(text="too late", delay=HANG_SECONDS))

    def garbage(self) -> None:
        """A 200 whose body is not the API's format: an HTML page, or SSE events of it."""
        self.enqueue(Reply(garbage=True))

    def broken_stream(self, text: str = "this answer is cut off before it ends") -> None:
        """Send the first half of the answer, then drop the connection."""
        self.enqueue(Reply(text=text, broken=True))

    @property
    def pending_replies(self) -> int:
        return len(self._queue)

    # --- recording -------------------------------------------------------------------

    @property
    def model_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path in self.MODEL_PATHS]

    def prompt_text(self, request: RecordedRequest) -> str:
        """Every piece of text the model was sent in one request, one piece per line."""
        return self._prompt_of(request.json)

    @property
    def intercepted_requests(self) -> list[RecordedRequest]:
        """Model calls an interceptor answered (side calls such as a classification)."""
        return [r for r in self.model_requests if r.intercepted]

    @property
    def scripted_requests(self) -> list[RecordedRequest]:
        """Model calls no interceptor answered: the calls a test scripts and counts."""
        return [r for r in self.model_requests if not r.intercepted]

    def last_prompt_text(self) -> str:
        """The prompt of the latest model call an interceptor did not answer (the call a test
        scripts): system, history and user turn as one string."""
        requests = self.scripted_requests
        if not requests:
            raise LookupError(f"{type(self).__name__} has received no model request")
        return self.prompt_text(requests[-1])

    def all_prompt_text(self) -> str:
        """The prompts of every model call so far, for "this was never sent" assertions."""
        return "\n".join(self.prompt_text(r) for r in self.model_requests)

    # --- lifecycle -------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return self._port

    async def start(self) -> Self:
        app = web.Application()
        app.add_routes([*self._routes(), web.route("*", "/{path:.*}", self._unknown_path)])
        # A short shutdown timeout so a scripted delay does not hold up teardown.
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, handler_cancellation=True)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        self._runner = None
        self._port = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def start_in_thread(self) -> Self:
        """Serve from a daemon thread with its own event loop, e.g. for a `halo serve` subprocess."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=type(self).__name__, daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        asyncio.run_coroutine_threadsafe(self.start(), loop).result(timeout=10)
        return self

    def stop(self) -> None:
        """Stop a server started with `start_in_thread`."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = None

    # --- for subclasses ----------------------------------------------------------------

    def _routes(self) -> Iterable[web.RouteDef]:
        raise NotImplementedError

    def _error_body(self, status: int, message: str) -> JSON:
        raise NotImplementedError

    async def _unknown_path(self, request: web.Request) -> web.Response:
        """Record and 404 anything else, so a wrong base_url shows up in `requests`."""
        await self._record(request)
        message = f"{type(self).__name__} does not serve {request.method} {request.path}"
        return web.json_response(self._error_body(404, message), status=404)

    def _prompt_of(self, body: JSON) -> str:
        return "\n".join(strings_in([body.get(field) for field in self.PROMPT_FIELDS]))

    def _billed_of(self, body: JSON) -> str:
        """What a provider counts as input: the tool schemas first (with `bill_tool_schemas`), then the prompt."""
        tools = body.get("tools") if self.bill_tool_schemas and isinstance(body, dict) else None
        return (json.dumps(tools) + "\n" if tools else "") + self._prompt_of(body)

    def _cached_tokens(self, body: JSON) -> int:
        """With `prefix_cache` on: the tokens of the longest prompt prefix this model saw before,
        cut back to a whole word (a provider caches whole tokens, from the start of the request)."""
        if not self.prefix_cache or not isinstance(body, dict):
            return 0
        prompt = self._billed_of(body)
        seen = self._seen_prompts.setdefault(str(body.get("model")), [])
        shared = max((_common_prefix(prompt, earlier) for earlier in seen), default=0)
        seen.append(prompt)
        if shared < len(prompt):
            shared = max(0, prompt.rfind(" ", 0, shared + 1), prompt.rfind("\n", 0, shared + 1))
        tokens = count_tokens(prompt[:shared])
        if tokens < self.prefix_cache_min_tokens:
            return 0
        return tokens - (tokens - self.prefix_cache_min_tokens) % self.prefix_cache_step

    def openai_cache_rules(self) -> None:
        """Cache as OpenAI does: prompts of 1024 tokens or more, the shared prefix in 128-token steps."""
        self.prefix_cache = True
        self.prefix_cache_min_tokens, self.prefix_cache_step = 1024, 128

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    async def _record(self, request: web.Request) -> Any:
        body = _json_or_text(await request.read())
        headers = {name.lower(): value for name, value in request.headers.items()}
        self.requests.append(RecordedRequest(request.method, request.path, headers, body))
        return body

    def _intercept(self, body: JSON) -> Reply | None:
        for intercept in self.interceptors:
            answer = intercept(body)
            if answer is not None:
                return Reply(text=answer) if isinstance(answer, str) else answer
        return None

    def _next_reply(self, body: JSON) -> Reply:
        if self._queue:
            return self._queue.popleft()
        if self.responder is not None:
            answer = self.responder(body)
            return Reply(text=answer) if isinstance(answer, str) else answer
        return Reply(text=self.default_reply)

    async def _serve_model_call(
        self,
        request: web.Request,
        render_json: Callable[[Reply, JSON], JSON],
        render_events: Callable[[Reply, JSON], list[SseEvent]],
    ) -> web.StreamResponse:
        """Record the call, take the next reply and send it in the shape the request asked for."""
        body = await self._record(request)
        reply = self._intercept(body)
        if reply is not None:  # mark the request just recorded (no await since: it is the last one)
            self.requests[-1] = dataclasses.replace(self.requests[-1], intercepted=True)
        else:
            reply = self._next_reply(body)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.status != 200:
            return self._error_response(reply)
        if reply.garbage:
            return await _send_garbage(request, stream=bool(body.get("stream")))
        if body.get("stream"):
            events = render_events(reply, body)
            return await _send_events(request, events, broken=reply.broken, pace=reply.pace, midway=reply.midway)
        payload = json.dumps(render_json(reply, body)).encode()
        if reply.broken:
            return await _send_truncated(request, payload)
        return web.Response(body=payload, content_type="application/json")

    def _error_response(self, reply: Reply) -> web.Response:
        message = reply.error_message or f"scripted error {reply.status}"
        headers = {} if reply.retry_after is None else {"retry-after": f"{reply.retry_after:g}"}
        return web.json_response(self._error_body(reply.status, message), status=reply.status, headers=headers)


class FakeOpenAI(ScriptedModelServer):
    """OpenAI's /v1/chat/completions, /v1/responses and /v1/embeddings, scripted.

    Embeddings do not use the reply queue: they are deterministic unit vectors seeded by
    a hash of the input, `embedding_dim` long unless the request asks for `dimensions`.
    """

    MODEL_PATHS: ClassVar[frozenset[str]] = frozenset({"/v1/chat/completions", "/v1/responses"})
    PROMPT_FIELDS: ClassVar[tuple[str, ...]] = ("messages", "instructions", "input")

    def __init__(
        self, *, default_reply: str = "ok", responder: Responder | None = None, embedding_dim: int = 64
    ) -> None:
        super().__init__(default_reply=default_reply, responder=responder)
        self.embedding_dim = embedding_dim
        self.transcripts: list[str] = []  # what /v1/audio/transcriptions answers, in order
        self.audio: list[tuple[str, str, bytes]] = []  # (model, file name, bytes) of each transcription asked
        # what a transcription reports as `usage`: None as whisper-1's duration, tokens as gpt-4o-transcribe's
        self.transcription_usage: JSON | None = None
        self.sees_images = True  # False: a text-only model, which refuses image input with a 400

    @staticmethod
    def images_in(request: RecordedRequest) -> list[str]:
        """The image URLs (data URLs, as halo sends them) in one model request, in either API's shape:
        chat completions' `{"type": "image_url", "image_url": {"url"}}`, responses' `input_image`."""
        return _images_in(request.json)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    @property
    def responses_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/responses"]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/embeddings"]

    @staticmethod
    def embed(text: str, dim: int = 64) -> list[float]:
        """The vector the fake returns for `text`, so tests can compute expected similarities."""
        rng = random.Random(hashlib.sha256(text.encode()).digest())
        vector = [rng.gauss(0.0, 1.0) for _ in range(dim)]
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector]

    def _routes(self) -> Iterable[web.RouteDef]:
        return [
            web.post("/v1/chat/completions", self._chat_completions),
            web.post("/v1/responses", self._responses),
            web.post("/v1/embeddings", self._embeddings),
            web.post("/v1/audio/transcriptions", self._transcription),
        ]

    def _error_body(self, status: int, message: str) -> JSON:
        kind, code = _OPENAI_ERRORS.get(status, ("server_error", None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    # --- chat completions ---------------------------------------------------------

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve_model_call(request, self._chat_json, self._chat_events)

    def _next_reply(self, body: JSON) -> Reply:
        if not self.sees_images and _images_in(body):  # as a text-only model behind an OpenAI-style API answers
            return Reply(status=400, error_message="This model does not support image input.")
        return super()._next_reply(body)

    def _tool_call_ids(self, reply: Reply) -> list[str]:
        return [call.id or self._new_id("call") for call in reply.tool_calls]

    def _chat_json(self, reply: Reply, body: JSON) -> JSON:
        message: JSON = {"role": "assistant", "content": reply.text or None, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for call_id, c in zip(self._tool_call_ids(reply), reply.tool_calls, strict=True)
            ]
        choice = {"index": 0, "message": message, "finish_reason": _finish_reason(reply), "logprobs": None}
        return {
            **self._chat_envelope(body, "chat.completion"),
            "choices": [choice],
            "usage": _chat_usage(self._billed_of(body), reply, self._cached_tokens(body)),
        }

    def _chat_events(self, reply: Reply, body: JSON) -> list[SseEvent]:
        envelope = self._chat_envelope(body, "chat.completion.chunk")

        def chunk(delta: JSON, finish_reason: str | None = None) -> SseEvent:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            return None, json.dumps({**envelope, "choices": [choice]})

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in text_deltas(reply.text)]
        for index, (call_id, call) in enumerate(zip(self._tool_call_ids(reply), reply.tool_calls, strict=True)):
            opening = {"index": index, "id": call_id, "type": "function"}
            events.append(chunk({"tool_calls": [{**opening, "function": {"name": call.name, "arguments": ""}}]}))
            events += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in argument_deltas(json.dumps(call.arguments))
            ]
        events.append(chunk({}, _finish_reason(reply)))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = _chat_usage(self._billed_of(body), reply, self._cached_tokens(body))
            events.append((None, json.dumps({**envelope, "choices": [], "usage": usage})))
        events.append((None, "[DONE]"))
        return events

    def _chat_envelope(self, body: JSON, kind: str) -> JSON:
        created = int(time.time())
        return {
            "id": self._new_id("chatcmpl"),
            "object": kind,
            "created": created,
            "model": body.get("model"),
        }

    # --- responses ----------------------------------------------------------------

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._serve_model_call(request, self._response_json, self._response_events)

    def _response_items(self, reply: Reply) -> list[JSON]:
        items: list[JSON] = []
        if reply.text:
            content = [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]
            items.append(
                {
                    "id": self._new_id("msg"),
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": content,
                }
            )
        for call_id, call in zip(self._tool_call_ids(reply), reply.tool_calls, strict=True):
            items.append(
                {
                    "id": self._new_id("fc"),
                    "type": "function_call",
                    "call_id": call_id,
                    "name": call.name,
                    "arguments": json.dumps(call.arguments),
                    "status": "completed",
                }
            )
        return items

    def _response_json(self, reply: Reply, body: JSON, items: list[JSON] | None = None) -> JSON:
        prompt_tokens = count_tokens(self._billed_of(body))
        output_tokens = count_tokens(reply.text) + len(reply.tool_calls)
        return {
            "id": self._new_id("resp"),
            "object": "response",
            "created_at": time.time(),
            "model": body.get("model"),
            "status": "completed",
            "output": self._response_items(reply) if items is None else items,
            "instructions": body.get("instructions"),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "metadata": {},
            "text": {"format": {"type": "text"}},
            "usage": {
                "input_tokens": prompt_tokens,
                "input_tokens_details": {"cached_tokens": self._cached_tokens(body), "cache_write_tokens": 0},
                "output_tokens": output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt_tokens + output_tokens,
            },
        }

    def _response_events(self, reply: Reply, body: JSON) -> list[SseEvent]:
        """The event sequence of a streamed Responses API call, as OpenAI sends it."""
        items = self._response_items(reply)
        final = self._response_json(reply, body, items)
        started = {**final, "status": "in_progress", "output": [], "usage": None}
        events = [
            _event("response.created", response=started),
            _event("response.in_progress", response=started),
        ]
        for index, item in enumerate(items):
            events += _output_item_events(index, item)
        events.append(_event("response.completed", response=final))
        return [
            (event["type"], json.dumps({**event, "sequence_number": number})) for number, event in enumerate(events)
        ]

    # --- embeddings ---------------------------------------------------------------

    async def _transcription(self, request: web.Request) -> web.Response:
        """OpenAI's transcription endpoint: multipart `model` and `file`, `{"text": …}` back."""
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField) or not isinstance(form.get("model"), str):
            return web.json_response(self._error_body(400, "model and file are required"), status=400)
        data = upload.file.read()
        self.audio.append((str(form["model"]), upload.filename, data))
        self.requests.append(RecordedRequest("POST", request.path, dict(request.headers), {"model": form["model"]}))
        if not self.transcripts:
            return web.json_response(self._error_body(500, "no transcript scripted"), status=500)
        answer: JSON = {"text": self.transcripts.pop(0)}
        if self.transcription_usage is not None:
            answer["usage"] = self.transcription_usage
        return web.json_response(answer)

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if inputs and isinstance(inputs[0], int):  # a single pre-tokenised input
            inputs = [inputs]
        dim = body.get("dimensions") or self.embedding_dim
        data = []
        for index, item in enumerate(inputs):
            vector = self.embed(item if isinstance(item, str) else json.dumps(item), dim)
            if body.get("encoding_format") == "base64":  # the openai SDK's default
                encoded: Any = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            else:
                encoded = vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(count_tokens(item) if isinstance(item, str) else len(item) for item in inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


_OPENAI_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", "service_unavailable"),
}


def _event(kind: str, **fields: Any) -> JSON:
    return {"type": kind, **fields}


def _output_item_events(index: int, item: JSON) -> list[JSON]:
    """Added, deltas, done: how one Responses output item (message or function call) streams."""
    at = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        part = item["content"][0]
        empty_part = {**part, "text": ""}
        pending = {**item, "status": "in_progress", "content": []}
        body = [
            _event("response.content_part.added", **at, content_index=0, part=empty_part),
            *(
                _event("response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[])
                for piece in text_deltas(part["text"])
            ),
            _event("response.output_text.done", **at, content_index=0, text=part["text"], logprobs=[]),
            _event("response.content_part.done", **at, content_index=0, part=part),
        ]
    else:
        pending = {**item, "status": "in_progress", "arguments": ""}
        body = [
            *(
                _event("response.function_call_arguments.delta", **at, delta=piece)
                for piece in argument_deltas(item["arguments"])
            ),
            _event("response.function_call_arguments.done", **at, name=item["name"], arguments=item["arguments"]),
        ]
    return [
        _event("response.output_item.added", output_index=index, item=pending),
        *body,
        _event("response.output_item.done", output_index=index, item=item),
    ]


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def count_tokens(text: str) -> int:
    """A stand-in token count: one per word, so usage numbers are predictable."""
    return len(text.split())


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _chat_usage(prompt: str, reply: Reply, cached_tokens: int = 0) -> JSON:
    prompt_tokens = count_tokens(prompt)
    completion_tokens = count_tokens(reply.text) + len(reply.tool_calls)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def text_deltas(text: str) -> list[str]:
    """Split text into word-sized stream deltas that join back to the original."""
    return re.findall(r"\S+\s*|\s+", text)


def argument_deltas(text: str) -> list[str]:
    """Two deltas, so clients have to accumulate streamed tool arguments."""
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part]


def _json_or_text(raw: bytes) -> Any:
    """A request body: parsed JSON, else the raw text, else None when empty."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _images_in(value: Any) -> list[str]:
    if isinstance(value, list):
        return [url for item in value for url in _images_in(item)]
    if not isinstance(value, dict):
        return []
    if value.get("type") == "image_url" and isinstance(value.get("image_url"), dict):
        return [str(value["image_url"].get("url"))]
    if value.get("type") == "input_image":
        return [str(value.get("image_url"))]
    return [url for item in value.values() for url in _images_in(item)]


def strings_in(value: Any) -> list[str]:
    """Every string in a JSON value except structural ones (roles, types, ids, names)."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    if isinstance(value, dict):
        return [s for key, item in value.items() if key not in _PROMPT_METADATA_KEYS for s in strings_in(item)]
    return []


async def _send_events(
    request: web.Request,
    events: list[SseEvent],
    *,
    broken: bool,
    pace: float = 0.0,
    midway: asyncio.Event | None = None,
) -> web.StreamResponse:
    """Stream `events` as SSE; a broken stream stops half way and drops the connection."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for n, (name, data) in enumerate(events[: max(1, len(events) // 2)] if broken else events):
        if midway is not None and n == len(events) // 2:
            await midway.wait()
        if pace and n > 1:  # the opening and the first token at once, then one token each `pace`
            await asyncio.sleep(pace)
        prefix = f"event: {name}\n" if name else ""
        await response.write(f"{prefix}data: {data}\n\n".encode())
    if broken:
        _drop_connection(request)
        return response
    await response.write_eof()
    return response


async def _send_garbage(request: web.Request, *, stream: bool) -> web.StreamResponse:
    """What a misconfigured proxy or a broken server sends with a 200."""
    if not stream:
        return web.Response(text=GARBAGE, content_type="text/html")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for line in GARBAGE.split():
        await response.write(f"data: {line}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _send_truncated(request: web.Request, payload: bytes) -> web.StreamResponse:
    """Promise the whole body, send half of it and drop the connection."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(payload)
    await response.prepare(request)
    await response.write(payload[: len(payload) // 2])
    _drop_connection(request)
    return response


def _drop_connection(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()
