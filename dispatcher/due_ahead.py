"""The runs due in the next seconds, per queue: what an autoscaler needs to have executors up before a
herd arrives (issue 27, item 5). Pure: no I/O, no clock.

The leader's schedule book knows every active job's future ticks. For the groups due within the
longest horizon (`ScheduleBook.ahead`: the heap, not every job) each group's fire times are computed
once, as the planner does, and judged by its calendars and blackouts: a skipped tick counts for
nothing; the ticks a defer blackout holds (those from before `now` too) count as one run per job at
its release, what `run_once` (the default misfire policy) runs of them.
Each tick counts once per job of each queue (the group keeps those counts), a job with a max_runs
at most its runs left. Paused jobs are not in the book, so they count for nothing; a timed pause
that lifts within the horizon counts once it has lifted. Jitter is not added (it delays a run by at
most the job's jitter_s).

Due instants are counted in whole seconds from `now`: second k holds the runs due in
(now + k - 1 s, now + k s]. A horizon of h seconds is the sum of its first h seconds (`runs`) and
the largest of them (`peak`: the herd an executor pool must take at once).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from cronos.schedule_window import Filtered, verdict_of

# The horizons exported (the `within_s` label): a fixed set, so that manifests and dashboards can
# name one whatever the deployment: 30 s for pods that start fast, 60 s for most, 300 s for a pool
# scaled to zero on nodes that take minutes to come (a GPU node pool, a large image).
HORIZONS_S = (30, 60, 300)
# The most fire times one group contributes: a tick a second over the longest horizon, with room.
TICKS_LIMIT = 4 * max(HORIZONS_S)


class FireTimes(Protocol):
    def fire_times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]: ...


class Capped(Protocol):
    """A job with a max_runs (cronos.models.DispatchJob)."""

    @property
    def queue(self) -> str: ...
    @property
    def runs_left(self) -> int | None: ...


class Cursor(Protocol):
    @property
    def cursor(self) -> datetime: ...


class Upcoming(Protocol):
    """A group of the schedule book: one schedule, its jobs (with their cursors), the queues of its
    jobs (how many each) and its jobs with a max_runs, apart (dispatcher.schedule_book.Group)."""

    @property
    def schedule(self) -> FireTimes: ...
    @property
    def jobs(self) -> Mapping[int, Cursor]: ...
    @property
    def queues(self) -> Mapping[str, int]: ...
    @property
    def capped(self) -> Mapping[int, Capped]: ...


@dataclass(frozen=True, slots=True)
class Due:
    """One queue's runs due ahead, by horizon (seconds)."""

    runs: dict[int, int]  # runs due within the horizon
    peak: dict[int, int]  # the most runs due in one second of it


NOTHING = Due({h: 0 for h in HORIZONS_S}, {h: 0 for h in HORIZONS_S})


def _second(due: datetime, now: datetime) -> int:
    return max(1, math.ceil((due - now).total_seconds()))


def _seconds(group: Upcoming, now: datetime, until: datetime) -> list[int]:
    """The second (1, 2, ...) of each run of the group's schedule due in (now, until], in order:
    calendars and skip blackouts drop a tick; the ticks a defer blackout holds are one run at its
    release (the held ones from before `now` included: after the group's cursor, which its members
    share in steady state)."""
    schedule = group.schedule
    ticks = schedule.fire_times(now, until, TICKS_LIMIT)
    if not isinstance(schedule, Filtered):
        return [_second(tick, now) for tick in ticks]
    since = next(iter(group.jobs.values())).cursor if group.jobs else now
    if since < now:
        ticks = schedule.fire_times(since, now, 1) + ticks  # the first held, if any
    found: list[datetime] = []
    releases: set[datetime] = set()
    for tick in ticks:
        verdict = verdict_of(schedule, tick)
        if verdict is None:
            if tick > now:
                found.append(tick)
            continue
        release = verdict.release_at  # None: skipped, no run
        if release is not None and now < release <= until and release not in releases:
            releases.add(release)
            found.append(release)
    return [_second(due, now) for due in sorted(found)]


class Tally:
    """Runs due ahead of `now`, counted group by group (a caller may add them in chunks, yielding
    in between); `result` gives each queue's by horizon."""

    def __init__(self, now: datetime, horizons: tuple[int, ...] = HORIZONS_S) -> None:
        self.now = now
        self.horizons = horizons
        self.until = now + timedelta(seconds=max(horizons))
        self._by_second: dict[str, Counter[int]] = {}

    def add(self, groups: Iterable[Upcoming]) -> None:
        for group in groups:
            seconds = _seconds(group, self.now, self.until)
            if not seconds:
                continue
            for queue, jobs in group.queues.items():
                counts = self._counts(queue)
                for second in seconds:
                    counts[second] += jobs
            for job in group.capped.values():
                counts = self._counts(job.queue)
                for second in seconds[: max(job.runs_left or 0, 0)]:
                    counts[second] += 1

    def _counts(self, queue: str) -> Counter[int]:
        counts = self._by_second.get(queue)
        if counts is None:
            counts = self._by_second[queue] = Counter()
        return counts

    def result(self) -> dict[str, Due]:
        return {queue: _by_horizon(counts, self.horizons) for queue, counts in self._by_second.items()}


def runs_due(groups: Iterable[Upcoming], now: datetime, horizons: tuple[int, ...] = HORIZONS_S) -> dict[str, Due]:
    """Each queue's runs due within each horizon after `now`, and its peak second, from the groups
    due by the longest horizon (groups due later have no tick in it)."""
    tally = Tally(now, horizons)
    tally.add(groups)
    return tally.result()


def _by_horizon(counts: Counter[int], horizons: tuple[int, ...]) -> Due:
    runs, peak = {}, {}
    for h in horizons:
        within = [n for second, n in counts.items() if second <= h]
        runs[h] = sum(within)
        peak[h] = max(within, default=0)
    return Due(runs, peak)
