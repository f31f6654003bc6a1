"""Anthropic's prompt cache: a breakpoint at the end of halo's stable prefix.

Anthropic caches a request's prefix only up to a block marked `cache_control`, in the order
tools → system → messages. halo keeps its tool schemas and instructions byte-stable turn after
turn (what changes goes in a note after them, halo/pipeline/turn_agents.py), so one breakpoint
on the last block of the system prompt caches both. any-llm sends the system prompt as a plain
string and drops message-level `cache_control`, so the mark is put on at the one point the
Messages API request is built: the any-llm provider's parameter conversion. Nothing else of the
request changes; halo still carries no hand-written message translation.

What Anthropic reports back (input_tokens, cache_read_input_tokens, cache_creation_input_tokens)
any-llm folds into the OpenAI shape (prompt tokens = all three; cached = the cache reads), which
halo's usage meter records (halo/usage/meter.py) and prices the reads at the cached rate.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents.extensions.models.any_llm_model import AnyLLMModel
from agents.items import TResponseStreamEvent

from halo.runtime.heap import build_stream_types

BREAKPOINT: dict[str, str] = {"type": "ephemeral"}


def mark_stable_prefix(request: dict[str, Any]) -> dict[str, Any]:
    """`request` (Messages API keyword arguments) with a cache breakpoint on the last block of
    its stable prefix: the system prompt's last block, else the last tool when there is no system."""
    system = request.get("system")
    if isinstance(system, str) and system:
        request["system"] = [{"type": "text", "text": system, "cache_control": BREAKPOINT}]
    elif isinstance(system, list) and system and isinstance(system[-1], dict):
        request["system"] = [*system[:-1], {**system[-1], "cache_control": BREAKPOINT}]
    elif isinstance(tools := request.get("tools"), list) and tools and isinstance(tools[-1], dict):
        request["tools"] = [*tools[:-1], {**tools[-1], "cache_control": BREAKPOINT}]
    return request


class AnthropicCachedPrefixModel(AnyLLMModel):
    """any-llm's bridge to Claude, with every Messages request marked for Anthropic's prompt cache."""

    def _get_provider(self) -> Any:
        provider = super()._get_provider()
        if not getattr(provider, "_halo_marks_cache_prefix", False):
            convert = provider._convert_completion_params

            def convert_and_mark(*args: Any, **kwargs: Any) -> dict[str, Any]:
                return mark_stable_prefix(convert(*args, **kwargs))

            provider._convert_completion_params = convert_and_mark
            provider._halo_marks_cache_prefix = True
        return provider

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:  # type: ignore[override]
        """Claude streams through the SDK's chat completions stream handler (any-llm's Anthropic
        provider has no Responses API): its event types built leaves first (halo/runtime/heap.py)."""
        build_stream_types()
        return super().stream_response(*args, **kwargs)
