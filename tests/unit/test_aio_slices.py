"""cronos.aio.Slices: a long synchronous loop that calls `next()` lets the event loop run every slice."""

from __future__ import annotations

import asyncio
import time

from cronos.aio import Slices


async def _busy(seconds: float, slices: Slices | None) -> None:
    """CPU-bound work for `seconds`, in 0.1 ms items (a slice between items when given one)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        spin = time.perf_counter() + 0.0001
        while time.perf_counter() < spin:
            pass
        if slices is not None:
            await slices.next()


async def _longest_stall(work: asyncio.Task[None]) -> float:
    """The longest the loop went without running this coroutine while `work` ran."""
    longest, last = 0.0, time.perf_counter()
    while not work.done():
        await asyncio.sleep(0)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    return longest


async def test_a_loop_that_takes_its_slices_lets_the_event_loop_run_every_few_ms() -> None:
    slices = Slices(slice_s=0.002)
    stall = await _longest_stall(asyncio.create_task(_busy(0.1, slices)))
    assert slices.yields >= 20  # 100 ms of work in 2 ms slices
    assert stall < 0.05, f"the loop was held {stall * 1000:.0f} ms"


async def test_without_slices_the_same_loop_holds_the_event_loop_throughout() -> None:
    # The test above could not fail if the work yielded by itself: it does not.
    stall = await _longest_stall(asyncio.create_task(_busy(0.1, None)))
    assert stall >= 0.09
