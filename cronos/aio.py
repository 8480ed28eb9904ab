"""Small asyncio helpers every role uses."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator


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


# The longest other work waits for the foreground at a time (a steady tick write at a million
# jobs takes 50-150 ms; an executor's claims of a second's thousand runs, about as long).
FOREGROUND_MOST_S = 0.25


class Foreground:
    """Work that other work gives way to: the leader's tick write, which its background passes wait
    for (their `Slices` wait at each yield instead of taking another slice), and an executor's
    claims, which its finishes wait for (executor.deps). Yielding alone is not enough: a write
    awaits a dozen times (a connection, each statement, the commit), and a pass that takes its
    slice at each of them makes the write that many slices longer. Other work waits at most
    `most_s` at a time: through a long catch-up (rounds back to back, seconds each) a pass still
    moves on (a health pass still alerts), a slice every `most_s`."""

    def __init__(self, most_s: float = FOREGROUND_MOST_S) -> None:
        self._most_s = most_s
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        self._running += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def idle(self) -> None:
        """Until no foreground work runs, or `most_s` passed."""
        if self._idle.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._most_s):
                await self._idle.wait()


class Slices:
    """Yield to the event loop once `slice_s` has passed since the last yield: call `await
    slices.next()` between two items of a long synchronous loop. Time, not a count: the cost of an
    item varies by orders of magnitude (a schedule parsed, a tick looked up). With `foreground`,
    each yield also waits until that work is idle."""

    def __init__(self, slice_s: float = SLICE_S, foreground: Foreground | None = None) -> None:
        self._slice_s = slice_s
        self._foreground = foreground
        self._since = time.perf_counter()
        self.yields = 0

    async def next(self) -> None:
        if time.perf_counter() - self._since >= self._slice_s:
            await asyncio.sleep(0)
            if self._foreground is not None:
                await self._foreground.idle()
            self.yields += 1
            self._since = time.perf_counter()
