"""The one way a test waits: poll a condition until it holds, never sleep for a fixed time.

`within` is generous on purpose (the suite must pass with the other core busy); a condition
that holds returns at once, so a generous limit costs nothing when things work.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_WITHIN = 20.0


async def eventually(
    check: Callable[[], T | Awaitable[T]], *, within: float = DEFAULT_WITHIN, what: str = "", every: float = 0.01
) -> T:
    """Return `check()`'s first truthy result (awaited when it is a coroutine), or fail with
    `what` after `within` seconds. `check` may also raise AssertionError until it holds."""
    deadline = time.monotonic() + within
    last_error: AssertionError | None = None
    while True:
        try:
            result: Any = check()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result
            last_error = None
        except AssertionError as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f": {last_error}" if last_error else ""
            raise AssertionError(f"timed out after {within}s waiting for {what or check}{detail}")
        await asyncio.sleep(every)


def until(check: Callable[[], T], *, within: float = DEFAULT_WITHIN, what: str = "", every: float = 0.05) -> T:
    """`eventually` for a test that is not async (another process's exit, say: no event of the
    test's own to wait on)."""
    return asyncio.run(eventually(check, within=within, what=what, every=every))
