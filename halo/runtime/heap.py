"""What a serving process holds: no library code it never runs, the heap after start-up out
of the garbage collector's way, and the model SDK's validators built once, not once per type."""

from __future__ import annotations

import functools
import gc
import sys
import typing
from collections.abc import Iterable

from pydantic import BaseModel


def skip_httpx_cli() -> None:
    """httpx (python-telegram-bot's client) imports its command-line client, `httpx._main`,
    on import, and with it rich and pygments when they are installed (rich comes with
    any-llm-sdk): ~3.5 MiB a server never runs (bench/serve_startup.py). A None in
    `sys.modules` makes that one import fail, and httpx then defines the stub `main` it has for
    installs without its CLI extra. Call before anything imports httpx; no effect after."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def freeze_start_up_heap() -> None:
    """What start-up built (modules, the Agents SDK, the policy, pydantic's schemas) lives as long
    as the process. Frozen (`gc.freeze`), it is no longer walked by every full collection: in
    bench/pipeline.py such a collection paused a turn for 140 ms. Call once, after start-up.

    No `gc.collect()` first: it found 50 unreachable objects among 264,000 and took 160 ms,
    on the way of the first chat (bench/serve_startup.py)."""
    gc.freeze()


def leaves_first(roots: Iterable[object]) -> list[type[BaseModel]]:
    """The pydantic models among `roots` and every model their fields name (through unions,
    lists, `Optional`, `Annotated` …), each once, every model after the models it holds. A
    field whose type is still a forward reference names nothing: its model is built inline."""
    seen: set[type[BaseModel]] = set()
    order: list[type[BaseModel]] = []

    def walk(annotation: object) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and annotation is not BaseModel:
            if annotation not in seen:
                seen.add(annotation)
                for field in annotation.model_fields.values():
                    walk(field.annotation)
                order.append(annotation)
        else:
            for arg in typing.get_args(annotation):
                walk(arg)

    for root in roots:
        walk(root)
    return order


@functools.cache
def build_stream_types() -> None:
    """The Agents SDK streams a chat completion as Responses API events, pydantic models it
    validates as it makes them; each one's validator is built on its first use. Built top down,
    as it uses them, every event inlines its own copy of what it holds (`Response`, the union of
    ~20 output items, the tools): ~7.5 MiB for a process's first streamed reply. Built leaves
    first, each later validator refers to the ones already built: ~3.8 MiB, in about the same
    time (bench/serve_startup.py). Once, before the first streamed chat completion."""
    from agents.models import chatcmpl_stream_handler

    for model in leaves_first(vars(chatcmpl_stream_handler).values()):
        model.model_rebuild(raise_errors=False)  # one it cannot build yet is left to the SDK, as before
