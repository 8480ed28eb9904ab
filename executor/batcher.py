"""Group commit for per-token code: each caller submits one item and awaits its own answer.

While one batch is at PostgreSQL or Redis, the next one fills up; when the call returns,
everything that arrived meanwhile goes out as the next batch. Per-token code stays a
straight line (lock, claim, run, record, release, ack) and still costs one round trip
per batch, not per token.

An item may wait for a wall-clock instant (`not_before_ms`): everything submitted for one
instant joins the queue together when it comes, in the timer's callback, so it goes out as
one batch without first waking every waiting caller (a burst of ticks due at one second is
claimed in one statement).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741 - item
O = TypeVar("O")  # noqa: E741 - outcome


class Withdrawn(Exception):
    """An item waiting for its instant was withdrawn before it came (`withdraw_waiting`)."""


class Batcher(Generic[I, O]):
    """`parallel` > 1 lets a new batch go out while earlier ones are still at the backend
    (claims: PostgreSQL runs two UPDATEs on two cores). `clock` is the wall clock that
    `not_before_ms` is read on (PostgreSQL's now() reads the same one)."""

    def __init__(
        self,
        name: str,
        call: Callable[[list[I]], Awaitable[Sequence[O]]],
        max_size: int = 1000,
        parallel: int = 1,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self._call = call
        self._max_size = max_size
        self._parallel = parallel
        self._queue: list[tuple[I, asyncio.Future[O]]] = []
        self._flushers: set[asyncio.Task[None]] = set()
        self._gathering = False  # a flusher is about to take the queue
        self._clock = clock
        # instant (epoch ms) -> the items waiting for it, and the timer that releases them
        self._waiting: dict[int, tuple[list[tuple[I, asyncio.Future[O]]], asyncio.TimerHandle | None]] = {}
        self.batches = 0

    async def submit(self, item: I, not_before_ms: int | None = None) -> O:
        """The item's answer, from the batch it went out with: at once, or (`not_before_ms`)
        once the wall clock reads that instant, never earlier. Raises Withdrawn if withdrawn
        while waiting; a caller cancelled while waiting is left out of the batch."""
        future: asyncio.Future[O] = asyncio.get_running_loop().create_future()
        if not_before_ms is None or self._clock() * 1000 >= not_before_ms:
            self._enqueue([(item, future)])
        elif (bucket := self._waiting.get(not_before_ms)) is not None:
            bucket[0].append((item, future))
        else:
            self._waiting[not_before_ms] = ([(item, future)], None)
            self._release(not_before_ms)
        return await future

    def _enqueue(self, items: list[tuple[I, asyncio.Future[O]]]) -> None:
        self._queue.extend(items)
        if not self._gathering and len(self._flushers) < self._parallel:
            self._gathering = True
            self._flushers.add(asyncio.create_task(self._flush(), name=f"batcher:{self.name}"))

    def _release(self, at_ms: int) -> None:
        """Timer callback: queue the instant's items once the wall clock has reached it (the
        timer runs on the loop's monotonic clock, so it re-arms if it fired early)."""
        items, _timer = self._waiting[at_ms]
        delay = at_ms / 1000 - self._clock()
        if delay > 0:
            self._waiting[at_ms] = (items, asyncio.get_running_loop().call_later(delay, self._release, at_ms))
            return
        del self._waiting[at_ms]
        self._enqueue([(item, future) for item, future in items if not future.done()])

    def withdraw_waiting(self) -> int:
        """Fail every item still waiting for its instant with Withdrawn; how many."""
        withdrawn = 0
        for items, timer in self._waiting.values():
            if timer is not None:
                timer.cancel()
            for _item, future in items:
                if not future.done():
                    future.set_exception(Withdrawn())
                    withdrawn += 1
        self._waiting.clear()
        return withdrawn

    async def _flush(self) -> None:
        gathering = True
        try:
            await asyncio.sleep(0)  # let the other tokens of this read submit too
            self._gathering = gathering = False
            await self._drain_queue()
        finally:
            if gathering:  # cancelled before taking the queue
                self._gathering = False
            # Leave the set before returning (not in a done callback, which runs later):
            # an item submitted meanwhile must see that a new flusher is needed.
            task = asyncio.current_task()
            if task is not None:
                self._flushers.discard(task)

    async def _drain_queue(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[: self._max_size], self._queue[self._max_size :]
            self.batches += 1
            try:
                answers = await self._call([item for item, _ in batch])
            except Exception as exc:  # noqa: BLE001 - every waiter gets it; the next batch still goes
                _fail(batch, exc)
                continue
            except asyncio.CancelledError:
                _fail(batch, asyncio.CancelledError())
                raise
            for (_, future), answer in zip(batch, answers, strict=True):
                if not future.done():
                    future.set_result(answer)

    async def close(self) -> None:
        for items, timer in self._waiting.values():
            if timer is not None:
                timer.cancel()
            _fail(items, asyncio.CancelledError())
        self._waiting.clear()
        _fail(self._queue, asyncio.CancelledError())
        self._queue = []
        for task in list(self._flushers):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _fail(batch: list[tuple[I, asyncio.Future[O]]], exc: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(exc)
