"""A job's schedule within its window, and one-off jobs: Schedule-like objects the planner,
the schedule book and the API use as they use a cron schedule. Pure: no clock, no I/O.

A window fires no tick before `start_at` nor after `end_at` (both inclusive bounds); a one-off
fires once, at `run_at`. Past its last tick a windowed schedule's `next_after` is `NEVER` (so
`fire_times` simply stops); `over_at` is the instant the leader may end the job (no tick left),
and `over_after(t)` says whether a tick at `t` was its last. An interval (cronos.interval) is a
base as a cron schedule is: every caller gets it through `job_schedule` / `schedule_of`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from cronos.dst import fire_times
from cronos.hashed import hashed
from cronos.interval import interval_of
from cronos.lifecycle import late_beyond_grace
from cronos.rules import NO_RULES, Rules, Verdict
from cronos.schedule import NEVER_AT
from cronos.schedule_legacy import StoredSchedule, stored_schedule
from cronos.schedule_union import ScheduleEntry, union_of
from cronos.spread import shifted

NEVER = NEVER_AT  # the one "no fire time" instant, as `@never` answers it
_TICK = timedelta(microseconds=1)
_FIRST = datetime.min.replace(tzinfo=UTC)


class NextAfter(Protocol):
    def next_after(self, after: datetime) -> datetime: ...


@dataclass(frozen=True, slots=True)
class OneOff:
    """Fires once, at `run_at`."""

    run_at: datetime

    def next_after(self, after: datetime) -> datetime:
        return self.run_at if after < self.run_at else NEVER


@dataclass(frozen=True, slots=True)
class Windowed:
    """`base`'s fire times t with start_at <= t <= end_at (None: unbounded on that side)."""

    base: NextAfter
    start_at: datetime | None = None
    end_at: datetime | None = None

    @property
    def one_off(self) -> bool:
        return isinstance(self.base, OneOff)

    @property
    def bounded(self) -> bool:
        return self.one_off or self.end_at is not None

    def next_after(self, after: datetime) -> datetime:
        if self.start_at is not None and after < self.start_at and self.start_at > _FIRST:
            after = self.start_at - _TICK
        try:
            found = self.base.next_after(after)
        except OverflowError:  # the calendar ends: no tick left either
            return NEVER
        return NEVER if self.end_at is not None and found > self.end_at else found

    def fire_times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
        """Fire instants ``t`` with ``after < t <= until`` within the window, ascending, at most ``limit``."""
        return fire_times(self.next_after, after, until, limit)

    def over_after(self, tick: datetime) -> bool:
        """No fire time is left after `tick`: a job whose tick at `tick` is written has ended."""
        return self.bounded and self.next_after(tick) == NEVER

    def due_after(self, after: datetime) -> datetime:
        """When the leader next has something to do for a job whose cursor is `after`: its next
        tick or, none left, `after` itself (it is over already: end it)."""
        found = self.next_after(after)
        return after if found == NEVER and self.bounded else found


@dataclass(frozen=True, slots=True)
class Filtered(Windowed):
    """A windowed schedule under calendars and blackouts (cronos.rules): the same fire times,
    each with a verdict. The leader's next instant for a job whose next tick is deferred is the
    tick's release (the end of its window), when the held ticks are written."""

    rules: Rules = NO_RULES

    def verdict(self, tick: datetime) -> Verdict | None:
        return self.rules.verdict(tick)

    def due_after(self, after: datetime) -> datetime:
        found = Windowed.due_after(self, after)
        if found in (NEVER, after):
            return found
        verdict = self.rules.verdict(found)
        return found if verdict is None or verdict.release_at is None else max(found, verdict.release_at)


def filtered(schedule: Windowed, rules: Rules) -> Windowed:
    """`schedule` under `rules` (itself when there are none: the common case costs nothing)."""
    if not rules:
        return schedule
    return Filtered(schedule.base, schedule.start_at, schedule.end_at, rules)


def verdict_of(schedule: object, tick: datetime) -> Verdict | None:
    """The verdict on a tick of any schedule (none unless it is Filtered)."""
    return schedule.verdict(tick) if isinstance(schedule, Filtered) else None


def job_schedule(
    cron_expression: str | None,
    timezone: str,
    *,
    run_at: datetime | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    every: str | None = None,
    anchor: datetime | None = None,
    key: str = "",
    parse: Callable[[str, str], tuple[Any, str | None]] = stored_schedule,
    schedules: Sequence[ScheduleEntry] = (),
    spread: str | None = None,
) -> tuple[Windowed, str | None]:
    """A stored job's schedule (a one-off when `run_at` is set, an interval when `every` is, with
    its further `schedules` as one: cronos.schedule_union) clamped to its window, and the parser's
    notice for a stored expression it now refuses (cronos.schedule_legacy). `key`: the job's name,
    which picks the values of an `H` (cronos.hashed) and its `spread`'s offset (cronos.spread), which
    moves every tick of the repeating schedule. Raises InvalidSchedule as `parse` does."""
    run_at, start_at, end_at = _aware(run_at), _aware(start_at), _aware(end_at)
    base: NextAfter
    notice = None
    if run_at is not None:
        base = OneOff(run_at)
    elif every is not None:
        base = interval_of(every, anchor)
    else:
        assert cron_expression is not None, "a job has a cron expression, an interval or a run_at"
        parsed: StoredSchedule
        parsed, notice = parse(hashed(cron_expression, key), timezone)
        base = parsed
    if run_at is None:
        base = shifted(union_of(base, schedules, timezone, key, parse), key, spread)
    return Windowed(base, start_at, end_at), notice


class Timed(Protocol):
    """What a job says about when it runs (cronos.models.Job and DispatchJob)."""

    @property
    def cron_expression(self) -> str | None: ...
    @property
    def timezone(self) -> str: ...
    @property
    def run_at(self) -> datetime | None: ...
    @property
    def start_at(self) -> datetime | None: ...
    @property
    def end_at(self) -> datetime | None: ...
    @property
    def every(self) -> str | None: ...
    @property
    def anchor(self) -> datetime | None: ...
    @property
    def name(self) -> str: ...
    @property
    def schedules(self) -> Sequence[ScheduleEntry]: ...
    @property
    def spread(self) -> str | None: ...


def schedule_of(
    job: Timed, parse: Callable[[str, str], tuple[Any, str | None]] = stored_schedule
) -> tuple[Windowed, str | None]:
    """`job_schedule` of a job."""
    return job_schedule(
        job.cron_expression, job.timezone, run_at=job.run_at, start_at=job.start_at, end_at=job.end_at,
        every=job.every, anchor=job.anchor, key=job.name, parse=parse, schedules=job.schedules,
        spread=job.spread,
    )  # fmt: skip


def _aware(instant: datetime | None) -> datetime | None:
    """asyncpg reads PostgreSQL's -infinity/infinity (what it writes for datetime.min/max, so for an
    instant at 0001-01-01T00:00Z too) as naive datetime.min/max: they are UTC."""
    return instant.replace(tzinfo=UTC) if instant is not None and instant.tzinfo is None else instant


def window_over(
    schedule: Windowed, cursor: datetime, now: datetime, runs_left: int | None = None, *, grace_s: float = 0.0
) -> bool:
    """A job created (its cursor at `cursor`) at `now` has no tick left to run: created already
    past its window, or a one-off whose instant is late beyond its grace `grace_s`."""
    if runs_left is not None and runs_left <= 0:
        return True
    if schedule.one_off:  # late within its grace it still runs; outside its window it never does
        assert isinstance(schedule.base, OneOff)
        run_at = schedule.base.run_at
        # Judged as the leader judges the tick when it writes it (lifecycle.late_beyond_grace).
        return late_beyond_grace(run_at, now, grace_s) or schedule.next_after(run_at - _TICK) == NEVER
    return schedule.bounded and schedule.next_after(cursor) == NEVER
