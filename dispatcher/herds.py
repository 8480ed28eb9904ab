"""Herds: instants at which many jobs are due, planned early in proportion to their size.

The leader writes ticks a fixed lookahead before they are due (half a second at the defaults).
A herd (100,000 jobs at `* * * * *`, or many schedules that all fire at :00) takes seconds to
write: written from that close, its tail reaches the ledger seconds late and its writes compete
with the executors' claims of its head. So the schedule book counts the jobs due at each instant
(its groups' next due instants, whatever their schedules) and an instant holding `n` jobs is
planned its push lead and `n / per_s` seconds ahead (at most `most_s` more than the lead), so
that it is in the ledger and held in the outbox by its push time; its tokens still go out then.
Pure: no clock, no I/O.
"""

from __future__ import annotations

import heapq
from datetime import datetime, timedelta

# Ticks the leader writes a second, conservatively (a loaded 2-core box writes 25-35k): the pace
# a herd's early start is sized by.
HERD_WRITE_PER_S = 20_000.0
# The earliest a herd is planned: a million jobs at one instant are not written more than this ahead.
HERD_MOST_AHEAD_S = 30.0
# Instants with fewer jobs are not tracked: the ticker's write-ahead (its push lead and a quarter
# second, dispatcher.ticker.write_ahead_s) writes them in time; this many take that quarter second.
HERD_MIN_JOBS = 5_000


class Herds:
    """Jobs due at each instant, and when each instant that holds a herd is to be planned."""

    def __init__(
        self,
        per_s: float = HERD_WRITE_PER_S,
        most_s: float = HERD_MOST_AHEAD_S,
        min_jobs: int = HERD_MIN_JOBS,
        lead_s: float = 0.0,
    ) -> None:
        self._per_s = per_s
        self._lead = timedelta(seconds=lead_s)  # the push lead: a herd is written by its push time
        self._most = timedelta(seconds=most_s)
        self._min_jobs = min_jobs
        self._load: dict[datetime, int] = {}
        self._heap: list[tuple[datetime, datetime]] = []  # (plan at, due); stale entries dropped lazily

    def clear(self) -> None:
        self._load.clear()
        self._heap.clear()

    def load(self, when: datetime) -> int:
        return self._load.get(when, 0)

    def plan_at(self, when: datetime, jobs: int) -> datetime:
        return when - self._lead - min(timedelta(seconds=jobs / self._per_s), self._most)

    def add(self, when: datetime, jobs: int) -> None:
        if jobs:
            self._set(when, self._load.get(when, 0) + jobs)

    def remove(self, when: datetime, jobs: int) -> None:
        if jobs:
            self._set(when, self._load.get(when, 0) - jobs)

    def _set(self, when: datetime, jobs: int) -> None:
        if jobs <= 0:
            self._load.pop(when, None)
            return
        self._load[when] = jobs
        if jobs >= self._min_jobs:
            heapq.heappush(self._heap, (self.plan_at(when, jobs), when))

    def _valid(self, entry: tuple[datetime, datetime]) -> bool:
        plan, when = entry
        jobs = self._load.get(when, 0)
        return jobs >= self._min_jobs and self.plan_at(when, jobs) == plan

    def next_plan(self) -> datetime | None:
        """When the next herd is to be planned (None: no herd)."""
        while self._heap:
            if self._valid(self._heap[0]):
                return self._heap[0][0]
            heapq.heappop(self._heap)
        return None

    def due_by(self, now: datetime) -> datetime | None:
        """The latest herd instant whose planning time has come by `now` (None: none); those
        herds leave the heap (their groups come back, with their load, when settled)."""
        latest = None
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            if self._valid(entry):
                latest = entry[1] if latest is None else max(latest, entry[1])
        return latest
