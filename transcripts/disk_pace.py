"""Whether an append may wait for the disk on the event loop itself, or must wait in a thread."""

from __future__ import annotations

import time
from collections.abc import Callable

SLOW_SECONDS = 0.005  # an append slower than this sends appends to worker threads …
BACK_OFF_SECONDS = 30.0  # … for this long; then one is tried on the loop again


class DiskPace:
    """A quick disk is waited for on the event loop: an fdatasync of 0.15 ms costs less than
    handing it to a thread (the hop, the GIL hand-off, the wake-up). In bench/pipeline.py that
    took the one-at-a-time p99 from about 10 ms to 5.5 and the 16-scope rate from about 270
    to 350 turns a second. One slow append (a busy SD card, a network disk) sends appends to
    worker threads for a while, so a slow disk never holds up every chat for long."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._threads_until = 0.0

    def quick(self) -> bool:
        """May the next append wait on the loop?"""
        return self.clock() >= self._threads_until

    def took(self, seconds: float) -> None:
        """How long an append on the loop took."""
        if seconds > SLOW_SECONDS:
            self._threads_until = self.clock() + BACK_OFF_SECONDS
