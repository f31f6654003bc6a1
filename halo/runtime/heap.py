"""The heap after start-up, out of the garbage collector's way."""

from __future__ import annotations

import gc


def freeze_start_up_heap() -> None:
    """What start-up built (modules, the Agents SDK, the policy, pydantic's schemas) lives as long
    as the process. Frozen (`gc.freeze`), it is no longer walked by every full collection: in
    bench/pipeline.py such a collection paused a turn for 140 ms. Call once, after start-up.

    No `gc.collect()` first: it found 50 unreachable objects among 264,000 and took 160 ms,
    on the way of the first chat (bench/serve_startup.py)."""
    gc.freeze()
