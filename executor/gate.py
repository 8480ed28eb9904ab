"""When a token may be claimed: at its due instant, with a free execution slot.

The gate sits in front of the claims batcher. A token pushed ahead of its due time waits
here; when the instant comes, one timer moves every token of that instant to the slot
queue, and those that get a slot go to the claims batcher at once, their callers not woken
until the claim answers (a burst of a thousand ticks is claimed in a few statements back
to back, `executor.deps.CLAIM_BATCH` runs each, not a batch per waking token). Held tokens
take no slot: slots bound only runs being claimed and executed, so tokens waiting for the
next second never keep this second's runs from starting. Slots are handed out in arrival
order, so ticks start in due order. On drain, `withdraw` gives every waiting token
Withdrawn: those go back unclaimed.

A running run that waits for something outside the executor (an http run for its host's limit,
`executor.host_limits`) lends its slot back meanwhile (`lend`) and takes one again, ahead of
every token, when it may go on (`reclaim`): a slow target's queue never holds the slots.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from executor.batcher import Batcher

I = TypeVar("I")  # noqa: E741 - item
O = TypeVar("O")  # noqa: E741 - outcome


class Withdrawn(Exception):
    """The executor is draining: a token still waiting here goes back unclaimed."""


@dataclass(eq=False)
class _Waiter(Generic[I, O]):
    item: I
    future: asyncio.Future[O]
    admitted: bool = False  # holds a slot (its item went to the batch)


@dataclass(eq=False)
class _Instant(Generic[I, O]):
    waiters: list[_Waiter[I, O]] = field(default_factory=list)
    sleepers: list[asyncio.Future[None]] = field(default_factory=list)  # `until` callers
    timer: asyncio.TimerHandle | None = None


class Gate(Generic[I, O]):
    """`route` picks another batcher for some items (a reserved run's start, which asks nothing:
    its batch never shares the fate of a claim that fails)."""

    def __init__(
        self,
        batcher: Batcher[I, O],
        slots: int,
        clock: Callable[[], float] = time.time,
        route: Callable[[I], Batcher[I, O] | None] | None = None,
    ) -> None:
        self._batcher = batcher
        self._route = route
        self.slots = slots
        self._free = slots
        self._queue: deque[_Waiter[I, O]] = deque()  # due, waiting for a slot
        self._clock = clock  # unix time by PostgreSQL's clock (cronos.clock)
        self._instants: dict[int, _Instant[I, O]] = {}
        self._closed = False  # withdrawn: nothing waits here any more
        self._reclaims: deque[asyncio.Future[None]] = deque()  # runs taking back a slot they lent

    @property
    def busy(self) -> int:
        """Slots taken."""
        return self.slots - self._free

    @property
    def queued(self) -> int:
        """Tokens due and waiting for a slot."""
        return sum(not w.future.done() for w in self._queue)

    @property
    def held(self) -> int:
        """Tokens waiting for their instant."""
        return sum(len(i.waiters) + len(i.sleepers) for i in self._instants.values())

    async def until(self, at_ms: int | None) -> None:
        """Return once the wall clock reads `at_ms` (at once for None or a past instant)."""
        self._check_open()
        if at_ms is None or self._clock() * 1000 >= at_ms:
            return
        sleeper: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._instant(at_ms).sleepers.append(sleeper)
        await sleeper

    async def claim(self, item: I, at_ms: int | None = None) -> O:
        """At `at_ms`, with a free slot, `item` goes out with its batch; its answer. The slot is
        then the caller's until `leave()`; when this raises, the caller holds none."""
        self._check_open()
        waiter: _Waiter[I, O] = _Waiter(item, asyncio.get_running_loop().create_future())
        if at_ms is None or self._clock() * 1000 >= at_ms:
            self._queue.append(waiter)
            self._admit()
        else:
            self._instant(at_ms).waiters.append(waiter)
        try:
            return await waiter.future
        except BaseException:
            if waiter.admitted:
                self.leave()
            else:
                waiter.admitted = True  # cancelled or withdrawn while waiting: never admitted now
            raise

    def leave(self) -> None:
        self._free += 1
        self._admit()

    def lend(self) -> None:
        """A running run gives its slot back while it waits elsewhere; `reclaim` before it goes on."""
        self.leave()

    async def reclaim(self) -> None:
        """Take back a lent slot, before any token waiting here. Whether this returns or raises
        (cancelled), the caller holds a slot again: its run gives it back when its work ends."""
        if self._free > 0 and not self._reclaims:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reclaims.append(future)
        try:
            await future
        except BaseException:
            if not future.done() or future.cancelled():  # none handed over: take one anyway (given back at once)
                future.cancel()
                self._free -= 1
            raise

    def retake(self) -> None:
        """Take back a lent slot at once, free or not, for a run whose work is ending (it leaves at once)."""
        self._free -= 1

    def _admit(self) -> None:
        while self._free > 0 and self._reclaims:
            future = self._reclaims.popleft()
            if not future.done():
                self._free -= 1
                future.set_result(None)
        while self._free > 0 and self._queue:
            waiter = self._queue.popleft()
            if waiter.future.done() or waiter.admitted:  # cancelled while waiting
                continue
            waiter.admitted = True
            self._free -= 1
            batcher = (self._route(waiter.item) if self._route else None) or self._batcher
            batcher.put(waiter.item, waiter.future)

    def _instant(self, at_ms: int) -> _Instant[I, O]:
        instant = self._instants.get(at_ms)
        if instant is None:
            instant = self._instants[at_ms] = _Instant()
            # Armed, not released here: the caller joins the instant after this returns. Released
            # here, an instant that came between the caller's clock reading and this one was gone
            # before the caller joined it, and that token waited for good (its run started only when
            # the watchdog pushed it again, 3 s late: tokens arrive at their instant, the push lead).
            delay = max(0.0, at_ms / 1000 - self._clock())
            instant.timer = asyncio.get_running_loop().call_later(delay, self._release, at_ms)
        return instant

    def _release(self, at_ms: int) -> None:
        """Timer callback: at the instant, its tokens join the slot queue together (the timer runs
        on the loop's monotonic clock, so it re-arms if it fired early)."""
        instant = self._instants[at_ms]
        delay = at_ms / 1000 - self._clock()
        if delay > 0:
            instant.timer = asyncio.get_running_loop().call_later(delay, self._release, at_ms)
            return
        del self._instants[at_ms]
        for sleeper in instant.sleepers:
            if not sleeper.done():
                sleeper.set_result(None)
        self._queue.extend(instant.waiters)
        self._admit()

    def _check_open(self) -> None:
        if self._closed:
            raise Withdrawn

    def withdraw(self) -> int:
        """Fail every token waiting for an instant or a slot with Withdrawn, and every later
        one; how many were waiting."""
        self._closed = True
        waiting: list[asyncio.Future[O] | asyncio.Future[None]] = [w.future for w in self._queue]
        for instant in self._instants.values():
            if instant.timer is not None:
                instant.timer.cancel()
            waiting.extend(w.future for w in instant.waiters)
            waiting.extend(instant.sleepers)
        self._instants.clear()
        self._queue.clear()
        withdrawn = 0
        for future in waiting:
            if not future.done():
                future.set_exception(Withdrawn())
                withdrawn += 1
        return withdrawn
