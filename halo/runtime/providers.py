"""Model providers: which Agents SDK `Model` a turn runs on, chosen in config.

- `openai`: the Responses API through the official `openai` client.
- `openai-compatible`: chat completions against `llm.base_url` (Ollama, vLLM, OpenRouter …).
- `anthropic`: the Agents SDK's `AnyLLMModel` bridge; any-llm talks to Claude through the
  official `anthropic` SDK, so halo carries no hand-written message translation. Each request
  marks a cache breakpoint at the end of the stable prefix (halo/runtime/anthropic_cache.py).
- `none`: no model; commands still work and free text gets a how-to-configure reply.

Retries are the runner's (one place, bounded, with backoff); client-level retries are off.
"""

from __future__ import annotations

import functools
import ssl
import weakref
from collections.abc import AsyncIterator
from functools import cached_property
from typing import Any

import httpx2
from agents import (
    Model,
    ModelRetrySettings,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    retry_policies,
)
from agents.items import TResponseStreamEvent
from agents.retry import RetryDecision, RetryPolicy, RetryPolicyContext
from agents.tracing.provider import DefaultTraceProvider
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from config.settings import LLMSettings
from halo.runtime.heap import build_stream_types

RETRYABLE_STATUS = (408, 409, 429, 500, 502, 503, 504, 529)


class ProviderConfigError(Exception):
    """The configured provider cannot be built (missing key, bad URL …)."""


def build_model(llm: LLMSettings, model_name: str | None = None) -> Model | None:
    """The Model for `llm.provider`, or None for `provider: none`."""
    name = model_name or llm.model
    if llm.provider == "none":
        return None
    api_key = llm.resolved_api_key()
    if llm.provider == "anthropic":
        from halo.runtime.anthropic_cache import AnthropicCachedPrefixModel

        if not api_key:
            raise ProviderConfigError(
                "llm.provider is anthropic but no API key is set: put it in HALO_LLM__API_KEY or ANTHROPIC_API_KEY"
            )
        return AnthropicCachedPrefixModel(model=f"anthropic/{name}", api_key=api_key, base_url=llm.base_url)
    if llm.provider == "openai-compatible" and not llm.base_url:
        raise ProviderConfigError(
            "llm.provider is openai-compatible but llm.base_url is not set (e.g. http://127.0.0.1:11434/v1 for Ollama)"
        )
    if llm.provider == "openai" and not api_key:
        raise ProviderConfigError(
            "llm.provider is openai but no API key is set: put it in HALO_LLM__API_KEY or OPENAI_API_KEY"
        )
    client = PlainBodyOpenAI(
        api_key=api_key or "not-needed",  # local servers ignore the key; the SDK insists on one
        base_url=llm.base_url,
        timeout=llm.timeout_seconds,
        max_retries=0,
        http_client=DefaultAsyncHttpxClient(verify=_tls_context()),
    )
    model: Model
    if llm.provider == "openai":
        model = OpenAIResponsesModel(model=name, openai_client=client)
    else:
        model = ChatCompletionsModel(model=name, openai_client=client)
    _CLIENTS[model] = client
    return model


class ChatCompletionsModel(OpenAIChatCompletionsModel):
    """The SDK's chat completions model, its stream event types built leaves first before the
    first streamed reply (halo/runtime/heap.py): half the memory they otherwise take."""

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:  # type: ignore[override]
        build_stream_types()
        return super().stream_response(*args, **kwargs)


def trace_only_when_asked(llm: LLMSettings) -> None:
    """With `llm.tracing` off (the default) every run says `tracing_disabled`, yet the Agents
    SDK's first run still builds its default trace exporter: an HTTP client with a TLS context
    of its own and a batch processor, ~1 MiB held for traces never sent (bench/serve_startup.py).
    A provider with no processor, disabled, takes its place. `llm` needs a restart to change, so
    this is decided at start; with tracing on, the SDK's default provider is (back) in place."""
    from agents.tracing import get_trace_provider, set_trace_provider

    if not llm.tracing:
        set_trace_provider(_NoTraces())
    elif isinstance(get_trace_provider(), _NoTraces):  # a halo built before in this process had it off
        from agents.tracing.processors import default_processor

        provider = DefaultTraceProvider()
        provider.register_processor(default_processor())
        set_trace_provider(provider)


class _NoTraces(DefaultTraceProvider):
    """Tracing off, and nothing to send a trace to."""

    def __init__(self) -> None:
        super().__init__()
        self.set_disabled(True)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every client this process makes: loading the CA bundle costs ~40 ms,
    which each client (one per routing level, again on every reload) would pay on its own."""
    return httpx2.create_ssl_context()  # what the client makes by default (httpx2: openai's HTTP library)


class _PlainBodyCompletions:
    """`chat.completions` sending `messages` and `tools` as they are.

    openai-python walks every request body through a type-driven transform which, for chat
    messages and tools, changes nothing and costs about a millisecond a message (measured:
    ~33 ms for a 22-message turn on this machine), on the event loop, on every turn. Handed
    over as `extra_body` they skip it; the JSON sent is the same.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create(self, *, messages: Any, extra_body: Any = None, **kwargs: Any) -> Any:
        body = {**(extra_body or {}), "messages": messages}
        tools = kwargs.pop("tools", None)
        if isinstance(tools, list):
            body["tools"] = tools
        return await self._inner.create(messages=[], extra_body=body, **kwargs)


class _PlainBodyChat:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.completions = _PlainBodyCompletions(inner.completions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class PlainBodyOpenAI(AsyncOpenAI):
    """The OpenAI client, with chat completions' per-request body transform skipped."""

    @cached_property
    def chat(self) -> Any:  # type: ignore[override]
        return _PlainBodyChat(super().chat)


_CLIENTS: weakref.WeakKeyDictionary[Model, AsyncOpenAI] = weakref.WeakKeyDictionary()


async def close_model(model: Model | None) -> None:
    """Close the HTTP client `build_model` made for `model` (its pooled connections), if any."""
    model = getattr(model, "inner", model)  # a MeteredModel (halo/usage/meter.py) closes what it wraps
    client = _CLIENTS.pop(model, None) if model is not None else None
    if client is not None:
        await client.close()


def model_settings(llm: LLMSettings) -> ModelSettings:
    """Bounded retries with exponential backoff for connection errors, 429 and 5xx."""
    return ModelSettings(
        max_tokens=llm.max_output_tokens,  # Anthropic requires one; others respect it
        include_usage=True,  # a streamed chat completion reports its usage too (halo/usage)
        retry=ModelRetrySettings(
            max_retries=llm.max_retries,
            backoff={
                "initial_delay": llm.retry_backoff_seconds,
                "max_delay": max(llm.retry_backoff_seconds * 8, 0.01),
                "multiplier": 2.0,
                "jitter": True,
            },
            policy=capped_retry_after(
                retry_policies.any(
                    retry_policies.network_error(),
                    retry_policies.retry_after(),
                    retry_policies.http_status(RETRYABLE_STATUS),
                ),
                min(llm.max_retry_after_seconds, llm.reply_deadline_seconds),
            ),
        ),
    )


def capped_retry_after(policy: RetryPolicy, longest: float) -> RetryPolicy:
    """`policy`, with any server-advised wait (Retry-After: 600) cut to `longest` seconds: a
    person is waiting, and the reply deadline would end the turn long before such a wait."""

    @functools.wraps(policy)  # keeps the SDK's capability marks on the wrapper
    async def capped(context: RetryPolicyContext) -> bool | RetryDecision:
        decision = policy(context)
        if not isinstance(decision, bool | RetryDecision):
            decision = await decision
        if isinstance(decision, bool):
            decision = RetryDecision(retry=decision)
        if decision.retry:
            advised = decision.delay if decision.delay is not None else context.normalized.retry_after
            if advised is not None:
                decision.delay = min(advised, longest)  # in place: the SDK's replay flags stay
        return decision

    return capped
