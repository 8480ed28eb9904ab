"""The group-commit batcher behind the executor's per-token steps (no I/O: a fake backend)."""

from __future__ import annotations

import asyncio

import pytest

from executor.batcher import Batcher, Withdrawn


class Backend:
    def __init__(self, fail_on: int | None = None) -> None:
        self.calls: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail_on = fail_on
        self.concurrent = 0
        self.max_concurrent = 0

    async def call(self, items: list[int]) -> list[int]:
        self.calls.append(items)
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            await self.gate.wait()
            if self.fail_on is not None and self.fail_on in items:
                raise ConnectionError("backend down")
            return [i * 10 for i in items]
        finally:
            self.concurrent -= 1


async def test_items_submitted_together_go_in_one_call_in_order() -> None:
    backend = Backend()
    batcher = Batcher("t", backend.call)
    assert await asyncio.gather(*(batcher.submit(i) for i in range(5))) == [0, 10, 20, 30, 40]
    assert backend.calls == [[0, 1, 2, 3, 4]]


async def test_items_arriving_during_a_call_form_the_next_batch() -> None:
    backend = Backend()
    backend.gate.clear()
    batcher = Batcher("t", backend.call)
    first = asyncio.gather(*(batcher.submit(i) for i in (1, 2)))
    await asyncio.sleep(0.01)
    second = asyncio.gather(*(batcher.submit(i) for i in (3, 4, 5)))
    await asyncio.sleep(0.01)
    backend.gate.set()
    assert await first == [10, 20] and await second == [30, 40, 50]
    assert backend.calls == [[1, 2], [3, 4, 5]] and backend.max_concurrent == 1


async def test_max_size_splits_batches() -> None:
    backend = Backend()
    batcher = Batcher("t", backend.call, max_size=2)
    await asyncio.gather(*(batcher.submit(i) for i in range(5)))
    assert backend.calls == [[0, 1], [2, 3], [4]]


async def test_a_failed_call_fails_its_batch_only() -> None:
    backend = Backend(fail_on=1)
    batcher = Batcher("t", backend.call)
    with pytest.raises(ConnectionError):
        await asyncio.gather(batcher.submit(0), batcher.submit(1))
    assert await batcher.submit(2) == 20  # the batcher keeps working


async def test_parallel_lets_a_second_batch_go_while_the_first_is_out() -> None:
    backend = Backend()
    backend.gate.clear()
    batcher = Batcher("t", backend.call, parallel=2)
    first = asyncio.ensure_future(batcher.submit(1))
    await asyncio.sleep(0.01)
    second = asyncio.ensure_future(batcher.submit(2))
    await asyncio.sleep(0.01)
    assert backend.max_concurrent == 2
    backend.gate.set()
    assert (await first, await second) == (10, 20)


async def test_a_cancelled_caller_does_not_stop_its_item_going_out() -> None:
    backend = Backend()
    backend.gate.clear()
    batcher = Batcher("t", backend.call)
    waiter = asyncio.ensure_future(batcher.submit(7))
    await asyncio.sleep(0.01)
    waiter.cancel()
    backend.gate.set()
    await asyncio.sleep(0.01)
    assert backend.calls == [[7]]  # the write still happened (results are never dropped half-way)


async def test_close_fails_queued_items() -> None:
    backend = Backend()
    backend.gate.clear()
    batcher = Batcher("t", backend.call)
    waiter = asyncio.ensure_future(batcher.submit(1))
    await asyncio.sleep(0.01)
    await batcher.close()
    with pytest.raises(asyncio.CancelledError):
        await waiter


class Clock:
    """A wall clock the test moves (seconds); the batcher's timers still run on the loop."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_items_waiting_for_an_instant_go_out_together_once_the_wall_clock_reads_it() -> None:
    backend, clock = Backend(), Clock(999.98)  # 20 ms before the instant: the timer fires, re-arms
    batcher = Batcher("t", backend.call, clock=clock)
    waiting = [asyncio.ensure_future(batcher.submit(i, not_before_ms=1_000_000)) for i in range(3)]
    now = asyncio.ensure_future(batcher.submit(9, not_before_ms=999_000))  # already past: at once
    assert await now == 90
    await asyncio.sleep(0.1)  # several timer firings: the wall clock still reads before the instant
    assert backend.calls == [[9]]
    clock.now = 1000.0
    assert await asyncio.gather(*waiting) == [0, 10, 20]
    assert backend.calls == [[9], [0, 1, 2]]


async def test_waiting_items_are_withdrawn_and_a_cancelled_one_left_out() -> None:
    backend, clock = Backend(), Clock(999.99)
    batcher = Batcher("t", backend.call, clock=clock)
    kept, cancelled = (asyncio.ensure_future(batcher.submit(i, not_before_ms=1_000_000)) for i in (1, 2))
    later = [asyncio.ensure_future(batcher.submit(i, not_before_ms=2_000_000)) for i in (3, 4)]
    await asyncio.sleep(0)
    cancelled.cancel()
    clock.now = 1000.0
    assert await kept == 10
    assert backend.calls == [[1]]
    assert batcher.withdraw_waiting() == 2
    for waiter in later:
        with pytest.raises(Withdrawn):
            await waiter
    clock.now = 2000.0
    await asyncio.sleep(0.05)  # their timer was cancelled: they never go out
    assert backend.calls == [[1]]
