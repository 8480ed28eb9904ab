"""cronos.aio.Slices: a long synchronous loop that calls `next()` lets the event loop run every slice,
and gives way to a `Foreground` while it runs."""

from __future__ import annotations

import asyncio
import time

import pytest

from cronos.aio import Foreground, Slices

# Bounds on wall-clock stalls: measured with no other test competing for the CPU (docs/development.md).
pytestmark = pytest.mark.serial


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


async def _slices_taken_during_a_write(foreground: Foreground, slices: Slices) -> int:
    """A write of 20 awaits (a connection, statements, a commit) while a pass runs in `slices`:
    how many slices the pass took meanwhile."""
    work = asyncio.create_task(_busy(10.0, slices))
    for _ in range(3):  # the pass is under way: it ran a slice or more
        await asyncio.sleep(0.003)
    before = slices.yields
    with foreground.running():
        for _ in range(20):
            await asyncio.sleep(0)
    taken = slices.yields - before
    work.cancel()
    return taken


async def test_a_pass_waits_while_the_foreground_runs() -> None:
    foreground = Foreground()
    taken = await _slices_taken_during_a_write(foreground, Slices(slice_s=0.002, foreground=foreground))
    assert taken <= 1, f"the pass took {taken} slices of 2 ms while the write ran"


async def test_a_pass_that_does_not_know_the_foreground_takes_a_slice_at_each_await() -> None:
    # The test above could not fail if the write were not slowed without the foreground: it is.
    taken = await _slices_taken_during_a_write(Foreground(), Slices(slice_s=0.002))
    assert taken >= 15, taken


async def test_a_pass_waits_for_the_foreground_only_so_long() -> None:
    # A catch-up writes for seconds: a pass (a health pass's alerts) must still move on.
    foreground = Foreground(most_s=0.02)
    slices = Slices(slice_s=0.002, foreground=foreground)
    work = asyncio.create_task(_busy(10.0, slices))
    await asyncio.sleep(0.01)
    with foreground.running():
        before = slices.yields
        await asyncio.sleep(0.2)  # ten waits of 20 ms: a slice after each
        taken = slices.yields - before
    work.cancel()
    assert 3 <= taken <= 12, taken
