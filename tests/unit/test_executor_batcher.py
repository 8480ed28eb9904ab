"""The group-commit batcher behind the executor's per-token steps (no I/O: a fake backend)."""

from __future__ import annotations

import asyncio
from asyncio import Task
from inspect import CORO_CREATED, getcoroutinestate

import pytest

from cronos.aio import Foreground
from executor.batcher import Batcher
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


async def submitted(batcher: Batcher[int, int], *items: int) -> list[Task[int]]:
    """Submit `items` together, each from its own caller; returns once every caller awaits its answer."""
    answers = [batcher.submit(i) for i in items]
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


async def test_a_long_queue_wakes_each_batchs_callers_while_the_next_batch_is_out() -> None:
    release = asyncio.Event()
    calls: list[list[int]] = []

    async def call(items: list[int]) -> list[int]:
        calls.append(items)
        if len(calls) > 1:
            await release.wait()  # the second batch is held at the backend
        return [i * 10 for i in items]

    batcher = Batcher("t", call, max_size=2)
    callers = await submitted(batcher, 1, 2, 3, 4)
    assert await asyncio.wait_for(asyncio.gather(*callers[:2]), 5) == [10, 20]
    assert calls == [[1, 2], [3, 4]] and not any(c.done() for c in callers[2:])
    release.set()
    assert await asyncio.gather(*callers[2:]) == [30, 40]


async def test_other_work_waits_for_the_whole_queue_with_a_foreground() -> None:
    """Not batch by batch: between two batches of one queue, work waiting for the foreground
    to be idle (the executor's finishes, behind its claims) stays waiting."""
    backend = Backend(held=True)
    foreground = Foreground(most_s=10)
    batcher = Batcher("t", backend.call, max_size=2, foreground=foreground)
    callers = await submitted(batcher, 1, 2, 3, 4, 5)
    waited_until: list[int] = []

    async def other_work() -> None:
        await foreground.idle()
        waited_until.append(len(backend.answered))

    await backend.started(1)
    other = asyncio.create_task(other_work())
    backend.gate.set()
    await asyncio.gather(*callers, other)
    assert backend.calls == [[1, 2], [3, 4], [5]]
    assert waited_until == [3], "went on only once every batch of the queue had answered"


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
