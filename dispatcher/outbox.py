"""The leader's outbox: the one way a queued run's token reaches the stream.

A run is in the outbox while it is queued and not pushed in this epoch (cronos.lifecycle: the
`pushed` and `unpushed` events). Every source queues into it: the ticks this leader writes, manual
triggers, retries, chain runs and woken waiting runs (the ledger's `take`); election, Redis losing
its data and the watchdog only put runs back (`unmark`). The misfire rule is applied here, once,
to every run taken from the ledger.

Ticks this leader writes are marked pushed by its epoch in the statement that writes them (no
second write per run on the hot path) and held here by push time (due time - push lead), so
pushing a token at its due time never waits behind a ledger write, and executors can lock a
burst's ticks ahead, then claim them together at the due instant the token carries. A stopping
leader pushes what it holds before it gives up its lock (`flush`). Tests drive `push_once(now)`
and `take(now)` with a fake `now`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta

from cronos.store.ledger import Ledger, QueuedRun
from dispatcher.publisher import Publisher

log = logging.getLogger("dispatcher.outbox")

PAGE = 5000


def ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


class Outbox:
    def __init__(self, ledger: Ledger, publisher: Publisher, epoch: Callable[[], int], lead_ms: int) -> None:
        self._ledger = ledger
        self._publisher = publisher
        self._epoch = epoch  # the current epoch, or raises LeadershipLost
        self._lead = timedelta(milliseconds=lead_ms)
        self._lead_ms = lead_ms
        self._held: list[tuple[int, int, QueuedRun]] = []  # (push_ms, run id, run): written here, not pushed yet
        self.wake = asyncio.Event()  # an earlier run to push, or the term is ending
        self.next_due: datetime | None = None  # when the ledger holds the next run to take

    # --- runs this leader wrote (marked pushed by its epoch as they were written) ---

    async def hold(self, runs: Iterable[QueuedRun], now: datetime, epoch: int) -> int:
        """Push at once the runs whose push time has come; hold the others. How many were pushed."""
        now_ms = ms(now)
        due_now = []
        for run in runs:
            push_ms = run.due_ms - self._lead_ms
            if push_ms <= now_ms:
                due_now.append(run)
            else:
                heapq.heappush(self._held, (push_ms, run.id, run))
                self.wake.set()
        return await self._publisher.publish(due_now, epoch)

    async def push_once(self, now: datetime) -> int:
        """Push the held runs whose push time has come."""
        self.wake.clear()
        now_ms = ms(now)
        due: list[QueuedRun] = []
        while self._held and self._held[0][0] <= now_ms:
            due.append(heapq.heappop(self._held)[2])
        if not due:
            return 0
        return await self._publisher.publish(due, self._epoch())

    def next_push(self) -> datetime | None:
        return datetime.fromtimestamp(self._held[0][0] / 1000, UTC) if self._held else None

    def drop(self, job_ids: set[int]) -> list[int]:
        """Forget the held runs of these jobs (paused or deleted: the change skipped them); their run ids."""
        dropped = [entry[2].id for entry in self._held if entry[2].job_id in job_ids]
        if dropped:
            self._held = [entry for entry in self._held if entry[2].job_id not in job_ids]
            heapq.heapify(self._held)
        return dropped

    async def flush(self, epoch: int) -> int:
        """A stopping leader: push every run it holds now (each token carries its due time, and
        executors wait for it), so nothing it wrote waits for the next leader."""
        held, self._held = [entry[2] for entry in sorted(self._held)], []
        return await self._publisher.publish(held, epoch)

    # --- runs from the ledger ---

    async def take(self, now: datetime) -> int:
        """Push every queued run the ledger holds unpushed and due within the lead (misfire
        applied); note when the next one is due."""
        pushed = 0
        while True:
            runs, misfired = await self._ledger.take(self._epoch(), now, now + self._lead, PAGE)
            pushed += await self._publisher.publish(runs, self._epoch())
            if misfired:
                log.info("stale ticks misfired", extra={"event": "runs.misfired", "count": misfired})
            if len(runs) + misfired < PAGE:
                break
        self.next_due = await self._ledger.next_due()
        return pushed

    async def unmark(self) -> int:
        """Election or Redis data loss: every queued run back in the outbox (what this leader held
        too: `take` pushes it again when due)."""
        self._held.clear()
        count = await self._ledger.unmark(self._epoch())
        self.next_due = None
        return count

    def take_at(self) -> datetime | None:
        """When the next run in the ledger's outbox may be taken (its due time less the lead)."""
        return None if self.next_due is None else self.next_due - self._lead

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
