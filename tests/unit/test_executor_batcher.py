"""The group-commit batcher behind the executor's per-token steps (no I/O: a fake backend)."""

from __future__ import annotations

import asyncio
from asyncio import Task
from inspect import CORO_CREATED, getcoroutinestate

import pytest

from executor.batcher import Batcher, Withdrawn
from tests.waiting import wait_for


class Backend:
    """Answers item * 10; `held` keeps every call open until `gate` is set. Calls starting and
    returning are signalled, so a test waits for them instead of sleeping."""

    def __init__(self, fail_on: int | None = None, held: bool = False) -> None:
        self.calls: list[list[int]] = []
        self.answered: list[list[int]] = []
        self.gate = asyncio.Event()
        if not held:
            self.gate.set()
        self.fail_on = fail_on
        self.concurrent = 0
        self.max_concurrent = 0
        self.changed = asyncio.Condition()

    async def call(self, items: list[int]) -> list[int]:
        await self._note(self.calls, items)
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            await self.gate.wait()
            if self.fail_on is not None and self.fail_on in items:
                raise ConnectionError("backend down")
            await self._note(self.answered, items)
            return [i * 10 for i in items]
        finally:
            self.concurrent -= 1

    async def _note(self, log: list[list[int]], items: list[int]) -> None:
        async with self.changed:
            log.append(items)
            self.changed.notify_all()

    async def started(self, calls: int) -> None:
        """Until `calls` calls have reached the backend."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: len(self.calls) >= calls), 5)

    async def returned(self, calls: int) -> None:
        """Until `calls` calls have been answered."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: len(self.answered) >= calls), 5)


async def submitted(batcher: Batcher[int, int], *items: int, not_before_ms: int | None = None) -> list[Task[int]]:
    """Submit `items` together, each from its own caller; returns once every caller awaits its answer."""
    answers = [batcher.submit(i, not_before_ms) for i in items]
    callers = [asyncio.ensure_future(a) for a in answers]

    async def all_in() -> bool:
        return all(getcoroutinestate(a) != CORO_CREATED for a in answers)

    await wait_for(all_in, timeout=5, interval=0, what=f"items {items} submitted")
    return callers


async def test_items_submitted_together_go_in_one_call_in_order() -> None:
    backend = Backend()
    batcher = Batcher("t", backend.call)
    assert await asyncio.gather(*(batcher.submit(i) for i in range(5))) == [0, 10, 20, 30, 40]
    assert backend.calls == [[0, 1, 2, 3, 4]]


async def test_items_arriving_during_a_call_form_the_next_batch() -> None:
    backend = Backend(held=True)
    batcher = Batcher("t", backend.call)
    first = await submitted(batcher, 1, 2)
    await backend.started(1)
    second = await submitted(batcher, 3, 4, 5)
    backend.gate.set()
    assert await asyncio.gather(*first) == [10, 20] and await asyncio.gather(*second) == [30, 40, 50]
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
    backend = Backend(held=True)
    batcher = Batcher("t", backend.call, parallel=2)
    first = await submitted(batcher, 1)
    await backend.started(1)
    second = await submitted(batcher, 2)
    await backend.started(2)
    assert backend.max_concurrent == 2
    backend.gate.set()
    assert await asyncio.gather(*first, *second) == [10, 20]


async def test_a_cancelled_caller_does_not_stop_its_item_going_out() -> None:
    backend = Backend(held=True)
    batcher = Batcher("t", backend.call)
    (waiter,) = await submitted(batcher, 7)
    await backend.started(1)
    waiter.cancel()
    backend.gate.set()
    await backend.returned(1)
    assert backend.answered == [[7]]  # the write still happened (results are never dropped half-way)


async def test_close_fails_queued_items() -> None:
    backend = Backend(held=True)
    batcher = Batcher("t", backend.call)
    (waiter,) = await submitted(batcher, 1)
    await backend.started(1)
    await batcher.close()
    with pytest.raises(asyncio.CancelledError):
        await waiter


class Clock:
    """A wall clock the test moves (seconds); the batcher's timers still run on the loop.
    Each reading is signalled: a timer that fired reads it."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.reads = 0
        self.read = asyncio.Event()

    def __call__(self) -> float:
        self.reads += 1
        self.read.set()
        return self.now

    async def read_again(self, times: int) -> None:
        """Until the batcher has read the clock `times` more times."""
        until = self.reads + times
        while self.reads < until:
            self.read.clear()
            await asyncio.wait_for(self.read.wait(), 5)


async def test_items_waiting_for_an_instant_go_out_together_once_the_wall_clock_reads_it() -> None:
    backend, clock = Backend(), Clock(999.98)  # 20 ms before the instant: the timer fires, re-arms
    batcher = Batcher("t", backend.call, clock=clock)
    waiting = await submitted(batcher, 0, 1, 2, not_before_ms=1_000_000)
    assert await batcher.submit(9, not_before_ms=999_000) == 90  # already past: at once
    await clock.read_again(3)  # the timer fired (and re-armed) a few times: the instant has not come
    assert backend.calls == [[9]]
    clock.now = 1000.0
    assert await asyncio.gather(*waiting) == [0, 10, 20]
    assert backend.calls == [[9], [0, 1, 2]]


async def test_waiting_items_are_withdrawn_and_a_cancelled_one_left_out() -> None:
    backend, clock = Backend(), Clock(999.99)
    batcher = Batcher("t", backend.call, clock=clock)
    kept, cancelled = await submitted(batcher, 1, 2, not_before_ms=1_000_000)  # due in 10 ms
    later = await submitted(batcher, 3, 4, not_before_ms=1_000_020)  # due in 30 ms
    cancelled.cancel()
    clock.now = 1000.0
    assert await kept == 10
    assert backend.calls == [[1]]
    assert batcher.withdraw_waiting() == 2
    for waiter in later:
        with pytest.raises(Withdrawn):
            await waiter
    # A later instant, whose timer fires after the withdrawn one would have: once it is
    # answered, the withdrawn items had their chance to go out.
    (sentinel,) = await submitted(batcher, 5, not_before_ms=1_000_030)
    clock.now = 1001.0
    assert await sentinel == 50
    assert backend.calls == [[1], [5]]
