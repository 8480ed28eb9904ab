"""Which ticks to write for these jobs, their cursors and now. Pure: no I/O, no clock.

The loop around it reads the clock, plans, writes the ledger, pushes, sleeps. Jobs come
grouped by schedule; the fire times of a group are computed once per distinct cursor
(in steady state every job of a group shares one cursor, so once per group per tick).

A round is columnar (one list per column) and cut into batches that each carry the
ticks *and* the new cursors of whole jobs, so a batch can be written in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from cronos.every_host import SKIP_PER_HOST, HostSpec, spec_of
from cronos.lifecycle import ON_TIME_S, end_status, expiry, jitter_s, misfire, one_pending, runs_allowed
from cronos.models import SKIP_MISFIRED, DispatchJob
from cronos.rules import Verdict
from cronos.schedule_window import Filtered, Windowed

# Ticks one job contributes to one round; a long outage is caught up over several rounds.
JOB_ROUND_LIMIT = 1000
# Late runs of a catch-up are spread out at this rate instead of being pushed at once.
CATCH_UP_PER_S = 2000.0


class FireTimes(Protocol):
    def fire_times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]: ...


@dataclass(slots=True)
class TickBatch:
    """Rows for one fenced transaction: ticks (queued or skipped), and each job's new cursor
    (its newest tick here: the ledger derives the same from the rows)."""

    job_ids: list[int] = field(default_factory=list)
    scheduled_for: list[datetime] = field(default_factory=list)
    due_at: list[datetime] = field(default_factory=list)
    skip_reason: list[str | None] = field(default_factory=list)
    revision: list[int] = field(default_factory=list)  # the job revision that planned the tick
    expires_at: list[datetime] = field(default_factory=list)  # each tick's expiry (lifecycle.expiry), stamped once
    # Its job holds one pending run at most (lifecycle.one_pending): the round's instant, at which
    # the tick is written skipped while an overdue run of the job, not expired then, has not
    # started. None: it does not.
    held_at: list[datetime | None] = field(default_factory=list)
    cursors: dict[int, datetime] = field(default_factory=dict)
    # Jobs whose last tick is here (window over, max_runs reached, one-off done): job id ->
    # (terminal status, the revision that planned it).
    ended: dict[int, tuple[str, int]] = field(default_factory=dict)
    runs: dict[int, int] = field(default_factory=dict)  # queued runs of each job with a max_runs
    queues: dict[int, str] = field(default_factory=dict)  # each job's queue (the stream its tokens go to)
    actions: dict[int, str | None] = field(default_factory=dict)  # each task job's action (its tokens carry it)
    shells: set[int] = field(default_factory=set)  # the shell jobs (their tokens say so)
    # Per-host jobs (cronos.every_host): their ticks are written skipped SKIP_PER_HOST, each with a
    # run per chosen host beside it (the leader chooses from presence as it writes the batch).
    per_host: dict[int, HostSpec] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.job_ids)


class CatchUpPace:
    """Due instants for late runs, at most `per_s` a second, kept across rounds.

    A long outage is caught up over several capped rounds: each round's late runs queue
    behind the previous round's, so the rate holds for the whole catch-up, not per round.
    """

    def __init__(self, per_s: float = CATCH_UP_PER_S) -> None:
        self.per_s = per_s
        self._step = timedelta(seconds=1 / per_s)
        self._next: datetime | None = None

    def slot(self, now: datetime) -> datetime:
        if self._next is None or self._next < now:
            self._next = now
        slot = self._next
        self._next = slot + self._step
        return slot


def _held_back(
    schedule: Filtered, ticks: list[datetime], until: datetime
) -> tuple[list[datetime], list[Verdict | None]]:
    """The ticks up to the first one deferred past `until` (held: written at its release), and
    each one's verdict."""
    verdicts: list[Verdict | None] = []
    for tick in ticks:
        verdict = schedule.verdict(tick)
        if verdict is not None and verdict.release_at is not None and verdict.release_at > until:
            break
        verdicts.append(verdict)
    return ticks[: len(verdicts)], verdicts


def _release(verdicts: list[Verdict | None] | None, index: int) -> datetime | None:
    verdict = None if verdicts is None else verdicts[index]
    return None if verdict is None else verdict.release_at


def _reasons(
    job: DispatchJob, ticks: list[datetime], verdicts: list[Verdict | None] | None, now: datetime, complete: bool
) -> list[str | None]:
    """Each tick's skip reason (None: it runs). A tick a calendar or a skip blackout excludes is
    skipped with that reason; the misfire policy judges the rest (a deferred tick is late once
    released: under `run_once` one of a window's ticks runs, under `run_all` every one), and a
    deferred tick it does not run keeps the blackout's name."""
    if verdicts is None:
        runs = misfire(job.misfire_policy, ticks, now, job.misfire_grace_s, complete=complete)
        return [None if run else SKIP_MISFIRED for run in runs]
    reasons: list[str | None] = [v.reason if v is not None else None for v in verdicts]
    open_ = [i for i, v in enumerate(verdicts) if v is None or v.release_at is not None]
    # Released ticks are judged at their release (the leader writes them up to a lookahead early).
    judged = max([now, *(v.release_at for v in verdicts if v is not None and v.release_at is not None)])
    runs = misfire(job.misfire_policy, [ticks[i] for i in open_], judged, job.misfire_grace_s, complete=complete)
    for i, run in zip(open_, runs, strict=True):
        verdict = verdicts[i]
        reasons[i] = None if run else (SKIP_MISFIRED if verdict is None else verdict.reason)
    return reasons


def _ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


class TickRound:
    """Every tick <= horizon (default: now) after each job's cursor, at most about `max_rows` rows,
    planned lazily batch by batch as it is iterated (the caller writes batch k while batch k+1
    is planned). Counts and `truncated` (the round limit cut it: plan again at once) grow as it goes.

    A horizon past `now` plans upcoming ticks ahead of time (queued, due later), so that their
    tokens can be pushed the moment they are due; lateness is judged against `now`, the instant
    the round started (so a big burst is not judged late by its own last batches).
    """

    def __init__(
        self,
        groups: Iterable[tuple[FireTimes, Iterable[DispatchJob]]],
        now: datetime,
        *,
        horizon: datetime | None = None,
        max_rows: int = 20_000,
        batch_rows: int = 2_000,
        job_limit: int = JOB_ROUND_LIMIT,
        pace: CatchUpPace | None = None,
        job_paces: dict[int, CatchUpPace] | None = None,
    ) -> None:
        self.runs = 0
        self._pace = pace or CatchUpPace()
        # Per-job paces (DispatchJob.catchup_max_per_s), kept across rounds by the caller.
        self._job_paces = {} if job_paces is None else job_paces
        self.skips = 0
        self.truncated = False
        self._batches = self._plan(groups, now, max(horizon or now, now), max_rows, batch_rows, job_limit)

    def __iter__(self) -> Iterator[TickBatch]:
        return self._batches

    @property
    def rows(self) -> int:
        return self.runs + self.skips

    def _plan(
        self,
        groups: Iterable[tuple[FireTimes, Iterable[DispatchJob]]],
        now: datetime,
        until: datetime,
        max_rows: int,
        batch_rows: int,
        job_limit: int,
    ) -> Iterator[TickBatch]:
        late_before = now - timedelta(seconds=ON_TIME_S)
        batch = TickBatch()
        for schedule, jobs in groups:
            by_cursor: dict[datetime, list[DispatchJob]] = {}
            for job in jobs:
                by_cursor.setdefault(job.cursor, []).append(job)
            for cursor, members in by_cursor.items():
                if self.rows >= max_rows:
                    break
                ticks = schedule.fire_times(cursor, until, job_limit + 1)
                if not ticks:
                    if isinstance(schedule, Windowed) and schedule.over_after(cursor):
                        for job in members:  # due only to be ended: its window holds no tick past the cursor
                            batch.ended[job.id] = (end_status(one_off=schedule.one_off, ran=0), job.revision)
                    continue
                complete = len(ticks) <= job_limit
                ticks = ticks[:job_limit]
                newest_here = complete  # the newest due tick is in this list
                verdicts = None
                if isinstance(schedule, Filtered):  # calendars, blackouts: once per group and cursor
                    held = len(ticks)
                    ticks, verdicts = _held_back(schedule, ticks, until)
                    newest_here = newest_here and len(ticks) == held
                    if not ticks:
                        continue  # the next tick is deferred: the group is due again at its release
                # Decisions depend on the policy and grace only: computed once per pair, not per job.
                decided: dict[tuple[str, float], list[str | None]] = {}
                for job in members:
                    reasons = decided.get((job.misfire_policy, job.misfire_grace_s))
                    if reasons is None:
                        reasons = _reasons(job, ticks, verdicts, now, newest_here)
                        decided[(job.misfire_policy, job.misfire_grace_s)] = reasons
                    kept, ended = runs_allowed([r is None for r in reasons], job.runs_left)
                    held_at = now if one_pending(job.misfire_policy, job.concurrency_policy) else None
                    ran = 0
                    spec = None if job.hosts is None else spec_of(job.hosts)
                    for index, (tick, reason) in enumerate(zip(ticks[:kept], reasons, strict=False)):
                        due = tick
                        if job.jitter_s > 0:
                            due = tick + timedelta(seconds=jitter_s(job.id, _ms(tick), job.jitter_s))
                        if reason is None:
                            release = _release(verdicts, index)
                            if release is not None:  # deferred: released at the window's end, paced
                                due = self._late_slot(job, max(due, release), release)
                            elif due < late_before:  # a late run: spread the catch-up out
                                due = self._late_slot(job, due, now)
                            self.runs += 1
                            ran += 1
                        else:
                            self.skips += 1
                        if spec is not None and reason is None:
                            reason = SKIP_PER_HOST  # the tick's own row: its runs are its hosts'
                            batch.per_host[job.id] = spec
                        batch.job_ids.append(job.id)
                        batch.scheduled_for.append(tick)
                        batch.due_at.append(due)
                        batch.expires_at.append(expiry(due, job.misfire_grace_s))
                        batch.skip_reason.append(reason)
                        batch.revision.append(job.revision)
                        batch.held_at.append(held_at)
                    if kept:
                        batch.cursors[job.id] = ticks[kept - 1]
                        batch.queues[job.id] = job.queue
                        batch.actions[job.id] = job.action
                        if job.shell:
                            batch.shells.add(job.id)
                    if job.runs_left is not None:
                        batch.runs[job.id] = ran
                    over = isinstance(schedule, Windowed) and schedule.over_after(ticks[kept - 1] if kept else cursor)
                    if ended or (complete and over):
                        one_off = isinstance(schedule, Windowed) and schedule.one_off
                        batch.ended[job.id] = (end_status(one_off=one_off, ran=ran), job.revision)
                    if len(batch) >= batch_rows:
                        yield batch
                        batch = TickBatch()
                if not complete:
                    self.truncated = True
            if self.rows >= max_rows:
                self.truncated = True
                break
        if len(batch) or batch.cursors or batch.ended:
            yield batch

    def _late_slot(self, job: DispatchJob, due: datetime, now: datetime) -> datetime:
        """The due time of a late run: behind the global catch-up pace, and the job's own if it has one."""
        due = max(due, self._pace.slot(now))
        if job.catchup_max_per_s is not None:
            pace = self._job_paces.get(job.id)
            if pace is None or pace.per_s != job.catchup_max_per_s:
                pace = self._job_paces[job.id] = CatchUpPace(job.catchup_max_per_s)
            due = max(due, pace.slot(now))
        return due
