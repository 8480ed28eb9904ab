"""The leader's in-memory schedule: active jobs grouped by (expression, time zone).

Each group keeps its next due instant (the first fire time after the oldest cursor of
its jobs) in a heap, so finding what is due costs O(due groups), not O(jobs), and each
distinct schedule is computed once per tick however many jobs share it. A tick round
(`round`: what is due, planned; cursors advanced as batches commit; groups settled) is
the one way the ticker and the tests drive it.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from cronos.errors import InvalidSchedule
from cronos.hashed import has_hash, hashed
from cronos.models import DispatchJob
from cronos.rules import EMPTY_BOOK, RuleBook
from cronos.schedule_legacy import stored_schedule
from cronos.schedule_union import any_hash
from cronos.schedule_window import NEVER, Windowed, filtered, schedule_of
from cronos.spread import offset_s
from dispatcher.herds import Herds
from dispatcher.planner import CATCH_UP_PER_S, JOB_ROUND_LIMIT, CatchUpPace, TickBatch, TickRound

# (expression, time zone, run_at, start_at, end_at, every, anchor[, more schedules and the name when an
# `H` in them picks values by it][, a spread's offset], the rules' key): jobs sharing a schedule, its
# window and its calendars and blackouts (cronos.rules). An interval ignores the zone (elapsed time):
# jobs with one every+anchor share a group.
Key = tuple[object, ...]

log = logging.getLogger("dispatcher.schedule_book")


def _key(spec: DispatchJob) -> Key:
    entries = spec.schedules  # an entry's cron without a zone of its own is in the job's
    zone = "" if spec.every is not None and not entries else spec.timezone
    expression = spec.cron_expression
    if expression is not None and has_hash(expression):  # `H`: its values are this job's (its name's)
        expression = hashed(expression, spec.name)
    key: Key = (expression, zone, spec.run_at, spec.start_at, spec.end_at, spec.every, spec.anchor)
    if entries:
        key = (*key, entries, spec.name if any_hash(None, entries) else "")
    if shift := offset_s(spec.name, spec.spread):  # a spread: ticks moved by the name's offset
        key = (*key, "spread", shift)
    return key


def _read(spec: DispatchJob) -> tuple[Any, ...]:
    return (
        _key(spec),
        spec.misfire_policy,
        spec.misfire_grace_s,
        spec.jitter_s,
        spec.revision,
        spec.runs_left,
        spec.catchup_max_per_s,
        spec.name,
        spec.queue,
        spec.calendars,
    )


def _same(a: DispatchJob, b: DispatchJob) -> bool:
    """Nothing the planner reads differs, except perhaps the cursor."""
    return _read(a) == _read(b)


class Group:
    __slots__ = ("capped", "counted", "jobs", "key", "next_due", "queues", "schedule")

    def __init__(self, key: Key, schedule: Windowed) -> None:
        self.key = key
        self.schedule = schedule
        self.jobs: dict[int, DispatchJob] = {}
        self.next_due: datetime | None = None
        # For the runs due ahead (dispatcher.due_ahead), kept as jobs come and go so that counting a
        # group costs its queues, not its jobs: the queues of the members without a max_runs, and
        # the members with one (their runs_left caps what they run).
        self.queues: Counter[str] = Counter()
        self.capped: dict[int, DispatchJob] = {}
        self.counted = 0  # its jobs counted in the herds' load at next_due


class ScheduleBook:
    def __init__(
        self,
        parse: Callable[[str, str], tuple[Any, str | None]] = stored_schedule,
        *,
        catchup_per_s: float = CATCH_UP_PER_S,
        herds: Herds | None = None,
    ) -> None:
        self._parse = parse
        self._herds = herds or Herds()  # jobs due at each instant: a herd is planned early
        self._pace = CatchUpPace(catchup_per_s)
        self._job_paces: dict[int, CatchUpPace] = {}  # jobs with their own catch-up pace
        self._ended: set[int] = set()  # jobs whose last tick a batch of this round wrote
        self._groups: dict[Key, Group] = {}
        self._jobs: dict[int, DispatchJob] = {}
        self._keys: dict[int, Key] = {}  # each job's group
        # Calendars and blackouts (cronos.rules); a change of them reloads the book (`clear`).
        self.rule_book: RuleBook = EMPTY_BOOK
        self._heap: list[tuple[datetime, int, Key]] = []
        self._seq = itertools.count()
        self.id_sum = 0  # with len(), a digest of the active set to compare with the database
        self.queues: Counter[str] = Counter()  # the queues of the jobs held: how many name each
        self._planning: list[Group] = []  # the groups of the round in progress

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    @property
    def group_count(self) -> int:
        return len(self._groups)

    def clear(self) -> None:
        self._groups.clear()
        self._jobs.clear()
        self._keys.clear()
        self._heap.clear()
        self._herds.clear()
        self.id_sum = 0
        self.queues.clear()

    def settle_all(self) -> None:
        self._settle_keys(list(self._groups))

    def apply(self, upserts: Iterable[DispatchJob], removals: Iterable[int], *, settle: bool = True) -> int:
        """Add or replace jobs, remove others. A job's cursor never moves back from what this book
        knew, except to a newer schedule's: a schedule change moves the cursor to its instant, and
        the ticks this book wrote ahead under the old one were handed over. A read older than
        the schedule this book holds is ignored. Each touched group is settled once (later, by
        `settle_all`, with settle=False). Returns how many changed."""
        touched: set[Key] = set()
        changed = 0
        for job_id in removals:
            if (key := self._drop(job_id)) is not None:
                touched.add(key)
                changed += 1
        for spec in upserts:
            old = self._jobs.get(spec.id)
            if old is not None:
                if spec.plan_revision < old.plan_revision:
                    continue  # read before the schedule change this book already holds
                if spec.plan_revision == old.plan_revision:
                    if spec.cursor <= old.cursor and _same(spec, old):
                        continue  # what we hold already (a resync sees jobs it knows)
                    spec.cursor = max(spec.cursor, old.cursor)
                touched.add(self._keys[spec.id])
                self._drop(spec.id)
            if (key := self._add(spec)) is not None:
                touched.add(key)
            changed += 1
        if settle:
            self._settle_keys(touched)
        return changed

    def _drop(self, job_id: int) -> Key | None:
        spec = self._jobs.pop(job_id, None)
        if spec is None:
            return None
        self.id_sum -= job_id
        self._job_paces.pop(job_id, None)
        key = self._keys.pop(job_id)
        group = self._groups[key]
        del group.jobs[job_id]
        if group.capped.pop(job_id, None) is None:
            group.queues[spec.queue] -= 1
            if not group.queues[spec.queue]:
                del group.queues[spec.queue]
        self.queues[spec.queue] -= 1
        if not self.queues[spec.queue]:
            del self.queues[spec.queue]
        if not group.jobs:
            self._set_due(group, None)
            del self._groups[key]  # its heap entries are now stale and get dropped
        return key

    def _add(self, spec: DispatchJob) -> Key | None:
        rules = self.rule_book.rules(spec.name, spec.queue, spec.calendars)
        key = (*_key(spec), rules.key)
        group = self._groups.get(key)
        if group is None:
            try:
                schedule, notice = schedule_of(spec, self._parse)
            except InvalidSchedule as exc:
                log.error(
                    "job has an invalid schedule; not dispatched",
                    extra={"event": "job.invalid_schedule", "job_id": spec.id, "error": str(exc)},
                )
                return None
            schedule = filtered(schedule, rules)
            if notice is not None:  # a stored row the parser now refuses keeps its old meaning
                log.warning(
                    "job's schedule is refused now; it runs on its previous meaning until edited",
                    extra={"event": "job.legacy_schedule", "job_id": spec.id, "notice": notice},
                )
            group = self._groups[key] = Group(key, schedule)
        group.jobs[spec.id] = spec
        if spec.runs_left is None:
            group.queues[spec.queue] += 1
        else:
            group.capped[spec.id] = spec
        self.queues[spec.queue] += 1
        self._jobs[spec.id] = spec
        self._keys[spec.id] = key
        self.id_sum += spec.id
        return key

    def next_due(self) -> datetime | None:
        while self._heap:
            when, _seq, key = self._heap[0]
            group = self._groups.get(key)
            if group is not None and group.next_due == when:
                return when
            heapq.heappop(self._heap)  # stale entry
        return None

    def ahead(self, until: datetime) -> list[Group]:
        """The groups due by `until`, left on the heap (dispatcher.due_ahead counts their runs ahead
        of time): a walk of the heap that stops below every entry past `until`, so it costs the
        groups due by then, not all of them; and the groups of a round in progress (off the heap)."""
        heap = self._heap
        found = {g.key: g for g in self._planning if self._groups.get(g.key) is g}
        stack = [0] if heap else []
        while stack:
            index = stack.pop()
            when, _seq, key = heap[index]
            if when > until:
                continue  # and so is every entry below it
            group = self._groups.get(key)
            if group is not None and group.next_due == when:
                found[key] = group  # once, however many entries a re-created group left
            stack.extend(child for child in (2 * index + 1, 2 * index + 2) if child < len(heap))
        return list(found.values())

    def next_herd(self) -> datetime | None:
        """When the next herd (dispatcher.herds) is to be planned, ahead of its due instant."""
        return self._herds.next_plan()

    @contextlib.contextmanager
    def round(
        self,
        now: datetime,
        *,
        horizon: datetime | None = None,
        max_rows: int = 20_000,
        batch_rows: int = 2_000,
        job_limit: int = JOB_ROUND_LIMIT,
    ) -> Iterator[TickRound]:
        """The planner's round over the groups due by `horizon` (default: now), and those of a herd
        whose planning time (dispatcher.herds) has come by `now`, up to its instant. Call `advance`
        with each batch once the ledger committed it; on exit the groups are settled: their next
        due instants follow the cursors that moved (and come back on the heap even after a failure)."""
        until = now if horizon is None else horizon
        if (herd := self._herds.due_by(now)) is not None:
            until = max(until, herd)
        groups = self._due(until)
        self._planning = groups  # off the heap meanwhile, still due: `ahead` counts them
        try:
            yield TickRound(
                ((g.schedule, g.jobs.values()) for g in groups),
                now,
                horizon=until,
                max_rows=max_rows,
                batch_rows=batch_rows,
                job_limit=job_limit,
                pace=self._pace,
                job_paces=self._job_paces,
            )
        finally:
            # Ended jobs leave the book (the ledger made them completed/expired, or they were
            # paused meanwhile and come back through the change that paused them).
            ended, self._ended = self._ended, set()
            for job_id in ended:
                self._drop(job_id)
            self._settle_keys([g.key for g in groups])
            self._planning = []

    def advance(self, batch: TickBatch) -> None:
        """Move the cursors of a committed batch forward (never back)."""
        for job_id, cursor in batch.cursors.items():
            spec = self._jobs.get(job_id)
            if spec is not None and cursor > spec.cursor:
                if spec.runs_left is not None:
                    spec.runs_left -= batch.runs.get(job_id, 0)
                spec.cursor = cursor
        self._ended.update(batch.ended)

    def _due(self, until: datetime) -> list[Group]:
        found: list[Group] = []
        while self._heap and self._heap[0][0] <= until:
            when, _seq, key = heapq.heappop(self._heap)
            group = self._groups.get(key)
            if group is not None and group.next_due == when:
                self._set_due(group, None)  # off the heap until settled
                found.append(group)
        return found

    def _settle_keys(self, keys: Iterable[Key]) -> None:
        for key in keys:
            group = self._groups.get(key)
            if group is None or not group.jobs:
                continue
            oldest = min(spec.cursor for spec in group.jobs.values())
            when = group.schedule.due_after(oldest)
            if when == NEVER:
                continue
            if when != group.next_due:
                self._set_due(group, when)
                heapq.heappush(self._heap, (when, next(self._seq), key))
            elif group.counted != len(group.jobs):
                self._set_due(group, when)  # jobs came or went: the load at its instant follows
        if len(self._heap) > 2 * len(self._groups) + 64:
            self._heap = [(g.next_due, next(self._seq), k) for k, g in self._groups.items() if g.next_due]
            heapq.heapify(self._heap)

    def _set_due(self, group: Group, when: datetime | None) -> None:
        """The group's next due instant, its jobs counted in the load at that instant."""
        if group.next_due is not None:
            self._herds.remove(group.next_due, group.counted)
        group.next_due, group.counted = when, 0
        if when is not None:
            group.counted = len(group.jobs)
            self._herds.add(when, group.counted)
