"""The leader's in-memory schedule: active jobs grouped by (expression, time zone).

Each group keeps its next due instant (the first fire time after the oldest cursor of
its jobs) in a heap, so finding what is due costs O(due groups), not O(jobs), and each
distinct schedule is computed once per tick however many jobs share it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from cronos.errors import InvalidSchedule
from cronos.schedule import parse_schedule
from dispatcher.planner import JobSpec

log = logging.getLogger("dispatcher.schedule_book")


def _same(a: JobSpec, b: JobSpec) -> bool:
    return (a.key, a.misfire_policy, a.misfire_grace_s, a.jitter_s, a.exclusive) == (
        b.key,
        b.misfire_policy,
        b.misfire_grace_s,
        b.jitter_s,
        b.exclusive,
    )


class Group:
    __slots__ = ("jobs", "key", "next_due", "schedule")

    def __init__(self, key: tuple[str, str], schedule: Any) -> None:
        self.key = key
        self.schedule = schedule
        self.jobs: dict[int, JobSpec] = {}
        self.next_due: datetime | None = None


class ScheduleBook:
    def __init__(self, parse: Callable[[str, str], Any] = parse_schedule) -> None:
        self._parse = parse
        self._groups: dict[tuple[str, str], Group] = {}
        self._jobs: dict[int, JobSpec] = {}
        self._heap: list[tuple[datetime, int, tuple[str, str]]] = []
        self._seq = itertools.count()
        self.id_sum = 0  # with len(), a digest of the active set to compare with the database

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def get(self, job_id: int) -> JobSpec | None:
        return self._jobs.get(job_id)

    @property
    def group_count(self) -> int:
        return len(self._groups)

    def clear(self) -> None:
        self._groups.clear()
        self._jobs.clear()
        self._heap.clear()
        self.id_sum = 0

    def replace_all(self, specs: Iterable[JobSpec]) -> None:
        """Load the whole active set at once (see the ticker for the chunked load)."""
        self.clear()
        self.apply(specs, ())

    def upsert(self, spec: JobSpec) -> None:
        """Add or replace one job; its cursor never moves back from what this book knew."""
        self.apply([spec], ())

    def remove(self, job_id: int) -> None:
        self.apply((), [job_id])

    def settle_all(self) -> None:
        self._settle_keys(list(self._groups))

    def apply(self, upserts: Iterable[JobSpec], removals: Iterable[int], *, settle: bool = True) -> int:
        """Many changes at once; each touched group is settled once (later, by `settle_all`,
        with settle=False). Returns how many changed."""
        touched: set[tuple[str, str]] = set()
        changed = 0
        for job_id in removals:
            if (key := self._drop(job_id)) is not None:
                touched.add(key)
                changed += 1
        for spec in upserts:
            old = self._jobs.get(spec.id)
            if old is not None:
                if spec.cursor <= old.cursor and _same(spec, old):
                    continue  # what we hold already (a resync sees jobs it knows)
                spec.cursor = max(spec.cursor, old.cursor)
                touched.add(old.key)
                self._drop(spec.id)
            if self._add(spec):
                touched.add(spec.key)
            changed += 1
        if settle:
            self._settle_keys(touched)
        return changed

    def _drop(self, job_id: int) -> tuple[str, str] | None:
        spec = self._jobs.pop(job_id, None)
        if spec is None:
            return None
        self.id_sum -= job_id
        group = self._groups[spec.key]
        del group.jobs[job_id]
        if not group.jobs:
            del self._groups[spec.key]  # its heap entries are now stale and get dropped
        return spec.key

    def _add(self, spec: JobSpec) -> bool:
        group = self._groups.get(spec.key)
        if group is None:
            try:
                schedule = self._parse(spec.expression, spec.timezone)
            except InvalidSchedule as exc:
                log.error(
                    "job has an invalid schedule; not dispatched",
                    extra={"event": "job.invalid_schedule", "job_id": spec.id, "error": str(exc)},
                )
                return False
            group = self._groups[spec.key] = Group(spec.key, schedule)
        group.jobs[spec.id] = spec
        self._jobs[spec.id] = spec
        self.id_sum += spec.id
        return True

    def next_due(self) -> datetime | None:
        while self._heap:
            when, _seq, key = self._heap[0]
            group = self._groups.get(key)
            if group is not None and group.next_due == when:
                return when
            heapq.heappop(self._heap)  # stale entry
        return None

    def due(self, now: datetime) -> list[Group]:
        """Groups with a tick at or before `now`; call `settle` with them after writing."""
        found: list[Group] = []
        while self._heap and self._heap[0][0] <= now:
            when, _seq, key = heapq.heappop(self._heap)
            group = self._groups.get(key)
            if group is not None and group.next_due == when:
                group.next_due = None  # off the heap until settled
                found.append(group)
        return found

    def advance(self, job_ids: Iterable[int], cursors: Iterable[datetime]) -> None:
        """Move cursors forward after a commit (never back)."""
        for job_id, cursor in zip(job_ids, cursors, strict=True):
            spec = self._jobs.get(job_id)
            if spec is not None and cursor > spec.cursor:
                spec.cursor = cursor

    def settle(self, groups: Iterable[Group]) -> None:
        """Recompute the next due instant of groups whose jobs' cursors may have moved."""
        self._settle_keys({g.key for g in groups})

    def _settle_keys(self, keys: Iterable[tuple[str, str]]) -> None:
        for key in keys:
            group = self._groups.get(key)
            if group is None or not group.jobs:
                continue
            oldest = min(spec.cursor for spec in group.jobs.values())
            when = group.schedule.next_after(oldest)
            if when != group.next_due:
                group.next_due = when
                heapq.heappush(self._heap, (when, next(self._seq), key))
        if len(self._heap) > 2 * len(self._groups) + 64:
            self._heap = [(g.next_due, next(self._seq), k) for k, g in self._groups.items() if g.next_due]
            heapq.heapify(self._heap)
