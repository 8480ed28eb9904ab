"""Small asyncio helpers every role uses."""

from __future__ import annotations

import asyncio
import time


async def wait_any(*events: asyncio.Event) -> None:
    """Return as soon as one of `events` is set (waiters are cleaned up either way)."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


# A leader's CPU-bound pass (an audit over a million jobs) runs between its tick writes and lease
# renewals on one event loop: it yields this often, so no write waits on it longer.
SLICE_S = 0.002


class Slices:
    """Yield to the event loop once `slice_s` has passed since the last yield: call `await
    slices.next()` between two items of a long synchronous loop. Time, not a count: the cost of an
    item varies by orders of magnitude (a schedule parsed, a tick looked up)."""

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self._slice_s = slice_s
        self._since = time.perf_counter()
        self.yields = 0

    async def next(self) -> None:
        if time.perf_counter() - self._since >= self._slice_s:
            await asyncio.sleep(0)
            self.yields += 1
            self._since = time.perf_counter()
