"""Group commit for per-token code: each caller submits one item and awaits its own answer.

While one batch is at PostgreSQL or Redis, the next one fills up; when the call returns,
everything that arrived meanwhile goes out as the next batch. Per-token code stays a
straight line (lock, claim, run, record, release, ack) and still costs one round trip
per batch, not per token. `Alarm` lines tokens up for that: those due at one instant wake
together.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741 - item
O = TypeVar("O")  # noqa: E741 - outcome


class Batcher(Generic[I, O]):
    """`parallel` > 1 lets a new batch go out while earlier ones are still at the backend
    (claims: PostgreSQL runs two UPDATEs on two cores)."""

    def __init__(
        self,
        name: str,
        call: Callable[[list[I]], Awaitable[Sequence[O]]],
        max_size: int = 1000,
        parallel: int = 1,
    ) -> None:
        self.name = name
        self._call = call
        self._max_size = max_size
        self._parallel = parallel
        self._queue: list[tuple[I, asyncio.Future[O]]] = []
        self._flushers: set[asyncio.Task[None]] = set()
        self._gathering = False  # a flusher is about to take the queue
        self.batches = 0

    async def submit(self, item: I) -> O:
        future: asyncio.Future[O] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if not self._gathering and len(self._flushers) < self._parallel:
            self._gathering = True
            self._flushers.add(asyncio.create_task(self._flush(), name=f"batcher:{self.name}"))
        return await future

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


class Alarm:
    """Wakes every waiter of one wall-clock instant together: one timer per instant, so the
    batched step they take next (the claim) goes out as one batch, not one per timer.

    The timer runs on the loop's monotonic clock and re-arms until `clock()` (the wall clock,
    which PostgreSQL's now() also reads) has reached the instant: never early.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._rings: dict[int, tuple[asyncio.Future[None], asyncio.TimerHandle | None]] = {}

    async def wait_until(self, at_ms: int) -> None:
        """Return once the wall clock reads `at_ms` (epoch ms) or later."""
        if self._clock() * 1000 >= at_ms:
            return
        ring = self._rings.get(at_ms)
        if ring is None:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._rings[at_ms] = (future, None)
            self._arm(at_ms)
        else:
            future = ring[0]
        await asyncio.shield(future)  # a waiter cancelled (drain) leaves the others' alarm alone

    def _arm(self, at_ms: int) -> None:
        future, _handle = self._rings[at_ms]
        delay = at_ms / 1000 - self._clock()
        if delay > 0:
            self._rings[at_ms] = (future, asyncio.get_running_loop().call_later(delay, self._arm, at_ms))
            return
        del self._rings[at_ms]
        if not future.done():
            future.set_result(None)

    def close(self) -> None:
        for future, handle in self._rings.values():
            if handle is not None:
                handle.cancel()
            future.cancel()
        self._rings.clear()
