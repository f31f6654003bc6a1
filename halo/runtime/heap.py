"""What a serving process holds: no library code it never runs, and the heap after start-up
out of the garbage collector's way."""

from __future__ import annotations

import gc
import sys


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
