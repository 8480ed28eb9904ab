"""Group commit for per-token code: each caller submits one item and awaits its own answer.

While one batch is at PostgreSQL or Redis, the next one fills up; when the call returns,
everything that arrived meanwhile goes out as the next batch. Per-token code stays a
straight line (lock, claim, run, record, release, ack) and still costs one round trip
per batch, not per token.

Waiting for an instant and for an execution slot is `executor.gate`'s, which `put`s the
items it releases together straight into the queue, without waking their callers. A queue
longer than `max_size` goes out a batch at a time, back to back: each batch's callers are
woken as it answers, while the next is out. With a `foreground`, the batches going out back
to back are foreground work (cronos.aio.Foreground): other work that waits for it to be idle
waits for the whole queue, not one batch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from cronos.aio import Foreground

I = TypeVar("I")  # noqa: E741 - item
O = TypeVar("O")  # noqa: E741 - outcome


class Batcher(Generic[I, O]):
    """`parallel` > 1 lets a new batch go out while earlier ones are still at the backend."""

    def __init__(
        self,
        name: str,
        call: Callable[[list[I]], Awaitable[Sequence[O]]],
        max_size: int = 1000,
        parallel: int = 1,
        foreground: Foreground | None = None,
    ) -> None:
        self.name = name
        self._call = call
        self._max_size = max_size
        self._parallel = parallel
        self._foreground = foreground
        self._queue: list[tuple[I, asyncio.Future[O]]] = []
        self._flushers: set[asyncio.Task[None]] = set()
        self._gathering = False  # a flusher is about to take the queue
        self.batches = 0

    async def submit(self, item: I) -> O:
        """The item's answer, from the batch it goes out with."""
        future: asyncio.Future[O] = asyncio.get_running_loop().create_future()
        self.put(item, future)
        return await future

    def put(self, item: I, future: asyncio.Future[O]) -> None:
        """Queue an item whose answer goes to `future` (a caller that is not woken to submit)."""
        self._queue.append((item, future))
        if not self._gathering and len(self._flushers) < self._parallel:
            self._gathering = True
            self._flushers.add(asyncio.create_task(self._flush(), name=f"batcher:{self.name}"))

    async def _flush(self) -> None:
        gathering = True
        try:
            await asyncio.sleep(0)  # let the other tokens of this read submit too
            self._gathering = gathering = False
            with self._foreground.running() if self._foreground else contextlib.nullcontext():
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
