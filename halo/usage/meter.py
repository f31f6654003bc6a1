"""Counting what each model call used, at the one place every call passes: the `Model`.

`MeteredModel` wraps an Agents SDK `Model` for one purpose (a reply at a level, the safety
classifier, extraction …) and records the usage each response reports — a failed or cut
short run still counts what it spent. Whose call it was (member, scope) is the turn's:
the gateway sets it with `attributed()` for the turn, and work the turn starts (after-turn
hooks, the classifier) inherits it, as asyncio tasks copy the context they start in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from agents import Model, ModelResponse, ModelSettings, ModelTracing, Tool
from agents.usage import Usage
from openai.types.responses import ResponseCompletedEvent

from halo.usage.store import Purpose, UsageRecord, UsageStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Attribution:
    member_id: str | None
    scope_id: str | None


_current: ContextVar[Attribution | None] = ContextVar("halo_usage_attribution", default=None)


@contextmanager
def attributed(member_id: str | None, scope_id: str | None) -> Iterator[None]:
    """Model calls made inside (and in tasks started inside) count for this member and scope."""
    token = _current.set(Attribution(member_id, scope_id))
    try:
        yield
    finally:
        _current.reset(token)


class UsageMeter:
    """Turns a reported usage into a stored row, dated by the family's calendar day."""

    def __init__(self, store: UsageStore, timezone: Callable[[], str], clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.timezone = timezone
        self.clock = clock

    def today(self) -> str:
        return self.day_of(self.clock())

    def day_of(self, ts: float) -> str:
        return datetime.fromtimestamp(ts, ZoneInfo(self.timezone() or "UTC")).date().isoformat()

    async def record(
        self,
        model: str,
        purpose: Purpose,
        input_tokens: int,
        cached_tokens: int,
        output_tokens: int,
        *,
        level: str | None = None,
    ) -> None:
        who = _current.get() or Attribution(None, None)
        now = self.clock()
        record = UsageRecord(
            ts=now,
            day=self.day_of(now),
            model=model,
            purpose=purpose,
            input_tokens=input_tokens,
            cached_tokens=cached_tokens,
            output_tokens=output_tokens,
            member_id=who.member_id,
            scope_id=who.scope_id,
            level=level,
        )
        self.store.add(record)  # written behind: a failed write is logged there, the reply goes on

    async def record_usage(self, model: str, purpose: Purpose, usage: Usage, *, level: str | None = None) -> None:
        details = usage.input_tokens_details
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        await self.record(model, purpose, usage.input_tokens, cached, usage.output_tokens, level=level)


def model_name(model: Model) -> str:
    """The provider's name for the model (`gpt-4.1-mini`, `anthropic/claude-…`)."""
    return str(getattr(model, "model", None) or type(model).__name__)


class MeteredModel(Model):
    """`inner`, with each response's reported usage recorded for `purpose` (and `level`)."""

    def __init__(self, inner: Model, meter: UsageMeter, purpose: Purpose, *, level: str | None = None) -> None:
        self.inner = inner
        self.meter = meter
        self.purpose = purpose
        self.level = level
        self.model = model_name(inner)

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        **kwargs: Any,
    ) -> ModelResponse:
        response = await self.inner.get_response(
            system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kwargs
        )
        await self.meter.record_usage(self.model, self.purpose, response.usage, level=self.level)
        return response

    async def stream_response(  # type: ignore[override]
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        stream = self.inner.stream_response(
            system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kwargs
        )
        async for event in stream:
            if isinstance(event, ResponseCompletedEvent):
                usage = getattr(event.response, "usage", None)
                if usage is not None:
                    details = getattr(usage, "input_tokens_details", None)
                    cached = int(getattr(details, "cached_tokens", 0) or 0)
                    await self.meter.record(
                        self.model, self.purpose, usage.input_tokens, cached, usage.output_tokens, level=self.level
                    )
            yield event

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.inner._cleanup_on_run_end(owner)
