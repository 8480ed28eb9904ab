"""The leader's watchdog: a run whose token went out but that nobody claimed goes back in the outbox.

A token can be lost after its push: an executor read it and died before claiming it, or
holds it while a backend is away, or Redis lost it in a way the leader did not see. Every
pass (a second at most) the watchdog exports the backlog as `cronos_runs_overdue` (queued
runs more than a second past due), marks every run still queued `overdue_after_ms` past due
whose token went out as not pushed, so the outbox pushes it again (applying the misfire rule),
and sweeps the waiting runs (cronos.store.waiters: a forbid wait that ran out, a wait nothing
will end). The tick lock and the conditional claim keep a repeated token once-only, so a token
that was only slow costs a denied lock.

Bounded under overload: while a queue's stream holds tokens no executor has read yet (its lag),
the overdue runs of that queue are a backlog being worked off (or wait for a pool that serves
the queue), not lost tokens, and none of them is pushed; the other queues' are (walking past
the lagging queues' overdue runs, which their misfire grace bounds). Otherwise
at most BATCH runs a pass, oldest first, and a run pushed again waits twice as long each time
before the next (its id is left out of the query meanwhile).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from cronos import metrics
from cronos.store.ledger import Ledger
from cronos.store.runs import RunStore
from dispatcher.lifetime import Lifetime
from dispatcher.publisher import Publisher

log = logging.getLogger("dispatcher.watchdog")

BATCH = 1000
MAX_DOUBLINGS = 4  # a run is pushed again after 1, 2, 4, 8, 16, 16, ... times overdue_after
PASS_S = 1.0  # the longest time between passes (the gauge's refresh)


class Backoffs:
    """When each run the watchdog pushed may be pushed again (pure: `now` is a parameter)."""

    def __init__(self, base_s: float) -> None:
        self._base_s = base_s
        self._entries: dict[int, tuple[float, int]] = {}  # run id -> (next allowed, pushes so far)

    def waiting(self, now: float) -> list[int]:
        """Runs pushed too recently to be pushed again at `now`."""
        return [run_id for run_id, (at, _) in self._entries.items() if at > now]

    def pushed(self, run_ids: Iterable[int], now: float) -> None:
        """Record this pass's pushes and forget runs whose wait is over but that were not pushed
        again (claimed or ended meanwhile: they are not overdue any more)."""
        for run_id in run_ids:
            pushes = self._entries.get(run_id, (0.0, 0))[1] + 1
            self._entries[run_id] = (now + self._base_s * 2 ** min(pushes - 1, MAX_DOUBLINGS), pushes)
        self._entries = {run_id: entry for run_id, entry in self._entries.items() if entry[0] > now}

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class Watchdog:
    def __init__(
        self,
        ledger: Ledger,
        store: RunStore,
        publisher: Publisher,
        epoch: Callable[[], int],
        overdue_after_ms: int,
        take_soon: Callable[[], None] = lambda: None,
    ) -> None:
        self._ledger = ledger
        self._store = store
        self._publisher = publisher
        self._epoch = epoch  # the current epoch, or raises LeadershipLost
        self._take_soon = take_soon  # the outbox pushes what was put back, now
        self._stranded: frozenset[int] = frozenset()  # waiting runs the last sweep saw with nothing ahead
        self.after_s = overdue_after_ms / 1000
        self.interval_s = min(PASS_S, self.after_s / 2) if self.after_s > 0 else PASS_S
        self.backoffs = Backoffs(self.after_s)

    async def run(self, term: Lifetime) -> None:
        try:
            while True:
                await term.sleep(self.interval_s)
                await self.once(time.monotonic())
        finally:
            metrics.RUNS_OVERDUE.set(0)  # a node that stops leading stops reporting a backlog

    async def once(self, now: float) -> int:
        """One pass at `now` (monotonic); how many runs were put back in the outbox."""
        swept = await self._store.sweep_waiters(self._epoch(), self._stranded)
        self._stranded = swept.stranded
        if swept.woken:
            self._take_soon()
        return await self._overdue(now)

    async def _overdue(self, now: float) -> int:
        overdue = await self._store.overdue()
        metrics.RUNS_OVERDUE.set(overdue)
        # None a second past due: none past a bound of a second or more either.
        if self.after_s <= 0 or (not overdue and self.after_s >= 1.0):
            self.backoffs.clear()
            return 0
        queues = await self._publisher.queues()
        lagging = await self._publisher.lagging(queues)  # tokens wait unread there: none is lost
        if len(lagging) == len(queues):
            return 0  # every stream has unread tokens: executors are behind everywhere, none is lost
        epoch = self._epoch()
        ids = await self._ledger.unmark_overdue(epoch, self.after_s, self.backoffs.waiting(now), BATCH, lagging)
        self.backoffs.pushed(ids, now)
        if not ids:
            return 0
        self._take_soon()
        metrics.WATCHDOG_REPUSHED.inc(len(ids))
        log.warning(
            "overdue runs pushed again",
            extra={
                "event": "runs.overdue_repushed",
                "epoch": epoch,
                "count": len(ids),
                "run_ids": ids[:20],
                "overdue_after_s": self.after_s,
            },
        )
        return len(ids)
