"""The leader's pusher: runs it wrote ahead wait here, by push time (due time - push lead).

Apart from the writer, so that pushing a token at its due time never waits behind a ledger
write, and executors can lock a burst's ticks ahead, then claim them together at the due
instant the token carries. Tests drive `push_once(now)` with a fake `now`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from cronos.store.ledger import QueuedRun
from dispatcher.publisher import Publisher


def ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


class Pusher:
    def __init__(self, publisher: Publisher, epoch: Callable[[], int], lead_ms: int) -> None:
        self._publisher = publisher
        self._epoch = epoch  # the current epoch, or raises LeadershipLost
        self._lead_ms = lead_ms
        self._pending: list[tuple[int, int, QueuedRun]] = []  # (push_ms, run id, run)
        self.wake = asyncio.Event()  # an earlier run to push, or the term is ending

    async def publish(self, runs: Iterable[QueuedRun], now: datetime, epoch: int) -> int:
        """Push at once the runs whose push time has come; hold the others. Returns how many were pushed."""
        now_ms = ms(now)
        due_now = []
        for run in runs:
            push_ms = run.due_ms - self._lead_ms
            if push_ms <= now_ms:
                due_now.append(run)
            else:
                heapq.heappush(self._pending, (push_ms, run.id, run))
                self.wake.set()
        return await self._publisher.publish(due_now, epoch)

    async def push_once(self, now: datetime) -> int:
        """Push the held runs whose push time has come."""
        self.wake.clear()
        now_ms = ms(now)
        due: list[QueuedRun] = []
        while self._pending and self._pending[0][0] <= now_ms:
            due.append(heapq.heappop(self._pending)[2])
        if not due:
            return 0
        return await self._publisher.publish(due, self._epoch())

    def next_push(self) -> datetime | None:
        return datetime.fromtimestamp(self._pending[0][0] / 1000, UTC) if self._pending else None

    def drop(self, job_ids: set[int]) -> list[int]:
        """Forget the held runs of these jobs (paused or deleted); their run ids."""
        dropped = [entry[2].id for entry in self._pending if entry[2].job_id in job_ids]
        if dropped:
            self._pending = [entry for entry in self._pending if entry[2].job_id not in job_ids]
            heapq.heapify(self._pending)
        return dropped

    async def run(self, clock: Callable[[], datetime], checkpoint: Callable[[], None]) -> None:
        while True:
            checkpoint()
            await self.push_once(clock())
            checkpoint()
            await sleep_until(self.next_push(), self.wake, clock)


async def sleep_until(when: datetime | None, event: asyncio.Event, clock: Callable[[], datetime]) -> None:
    """Sleep until `when` (None: no deadline) or until `event` is set."""
    if event.is_set():
        return
    delay = None if when is None else (when - clock()).total_seconds()
    if delay is not None and delay <= 0:
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(delay):
            await event.wait()
