"""The leader's reconciliation auditor: every tick a job's schedule had is in the ledger.

Each pass takes a past window old enough to have settled (ticks are written at their due
time, a failover's catch-up within seconds), computes the fire times every job had in it and
looks for each one in the ledger — a run of any state or a recorded skip. A tick with neither
is *unaccounted*: G2 says that never happens, so `cronos_ticks_unaccounted_total` must stay 0
and an alert fires when it moves (deploy/prometheus/alerts.yml).

Audited: jobs whose definition held through the whole window — no pause, resume or edit of theirs
since its start (such a window is left out rather than guessed: an edit raises no false alarm) —
active ones and those the leader ended meanwhile (a window, `max_runs` or a one-off done: up to
their last tick); a window or a one-off bounds their expected ticks as it bounds the leader's.

Each unaccounted tick is also a `missed` job event (cronos.health.missed, once per tick), written
fenced with the job's health row (verdict `missing`), so an operator is told.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from cronos import health, metrics
from cronos.aio import Foreground, Slices
from cronos.errors import InvalidInput, InvalidSchedule, NotLeader
from cronos.models import DEFAULT_QUEUE
from cronos.rules import EMPTY_BOOK, CalendarRef, RuleBook, Verdict
from cronos.schedule_union import ScheduleEntry, any_hash, as_entries
from cronos.schedule_window import job_schedule
from cronos.store.db import translate_errors
from cronos.store.health import HealthStore
from cronos.store.queries import upkeep as upkeep_q
from cronos.store.rules import RuleStore
from cronos.store.timestamps import unusable_row
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.auditor")

# Ticks of one pass read at most this many per job (a window is bounded, this bounds a job
# with a per-second schedule and a long first window).
JOB_TICKS_LIMIT = 10_000
# Unaccounted ticks named in the warning of one pass.
NAMED_LIMIT = 20
# Schedules read at a time, and jobs looked up in the ledger at a time: the event loop runs between.
GROUPS = 1000
CHUNK = 1000


_US = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class AuditedJob:
    id: int
    cron_expression: str | None  # None: a one-off at run_at, or an interval
    timezone: str
    created_at: datetime
    run_at: datetime | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    every: str | None = None  # an interval's (cronos.interval), from anchor
    anchor: datetime | None = None
    ended_after: datetime | None = None  # ended by the leader: its last tick (none is expected after it)
    name: str = ""  # name, queue and calendars: which blackouts may hold its ticks back (cronos.rules)
    queue: str = DEFAULT_QUEUE
    schedules: tuple[ScheduleEntry, ...] = ()  # more schedules (cronos.schedule_union)
    spread: str | None = None  # ticks moved by the offset its name picks (cronos.spread)
    calendars: tuple[CalendarRef, ...] = ()


@dataclass(slots=True)
class AuditResult:
    window: tuple[datetime, datetime]
    jobs: int = 0
    expected: int = 0
    unaccounted: list[tuple[int, datetime]] = field(default_factory=list)
    start_delays_s: list[float] = field(default_factory=list)


def _expected(job: AuditedJob, window: tuple[datetime, datetime]) -> list[datetime] | None:
    """The fire times the job's schedule had in the window (None: the dispatcher does not run it)."""
    start, end = window
    try:  # as the dispatcher reads it (a cron expression or an interval), within its window
        schedule, _notice = job_schedule(
            job.cron_expression,
            job.timezone,
            run_at=job.run_at,
            start_at=job.start_at,
            end_at=job.end_at,
            every=job.every,
            anchor=job.anchor,
            key=job.name,
            schedules=job.schedules,
            spread=job.spread,
        )
    except (InvalidInput, InvalidSchedule):
        return None  # the dispatcher does not run it either (logged there)
    # Its cursor started at creation (a one-off created late within its grace: just before run_at).
    born = job.created_at if job.run_at is None else min(job.created_at, job.run_at - _US)
    until = end if job.ended_after is None else min(end, job.ended_after)
    return schedule.fire_times(max(start, born), until, JOB_TICKS_LIMIT) if until > start else []


def _same_ticks(job: AuditedJob, start: datetime) -> tuple[object, ...]:
    """What a job's expected ticks depend on: jobs alike share one computation."""
    born = job.created_at if job.run_at is None else min(job.created_at, job.run_at - _US)
    key = job.name if _by_name(job) else ""  # picks its `H` and its spread's offset
    return (job.cron_expression, job.timezone, job.run_at, job.start_at, job.end_at, job.every, job.anchor,
            job.ended_after, max(start, born), key, job.schedules, job.spread)  # fmt: skip


def _by_name(job: AuditedJob) -> bool:
    """The job's name moves its ticks: an `H` (cronos.hashed) or a spread (cronos.spread)."""
    return job.spread is not None or any_hash(job.cron_expression, job.schedules)


def reconcile(
    jobs: Iterable[AuditedJob],
    found: set[tuple[int, datetime]],
    window: tuple[datetime, datetime],
    book: RuleBook = EMPTY_BOOK,
    memo: dict[tuple[object, ...], list[datetime] | None] | None = None,
) -> AuditResult:
    """Pure: the ticks each job's schedule had in (start, end] that `found` does not hold, but those a
    defer blackout still holds back (released after `end`: the leader writes them then). `memo`
    keeps the expected ticks of jobs alike across calls of one window."""
    start, end = window
    result = AuditResult(window)
    memo = {} if memo is None else memo
    for job in jobs:
        key = _same_ticks(job, start)
        if key not in memo:
            memo[key] = _expected(job, window)
        ticks = memo[key]
        if ticks is None:
            continue
        result.jobs += 1
        result.expected += len(ticks)
        missing = [t for t in ticks if (job.id, t) not in found]
        if missing and (rules := book.rules(job.name, job.queue, job.calendars)):
            missing = [t for t in missing if not _held(rules.verdict(t), end)]
        result.unaccounted.extend((job.id, t) for t in missing)
    return result


def _held(verdict: Verdict | None, end: datetime) -> bool:
    return verdict is not None and verdict.release_at is not None and verdict.release_at > end


# What AUDIT_SCHEDULES groups jobs by, as AuditedJob names it.
_SCHEDULE_FIELDS = (
    "cron_expression", "timezone", "run_at", "start_at", "end_at", "every", "anchor", "ended_after", "spread",
)  # fmt: skip
_INSTANTS = ("run_at", "start_at", "end_at", "anchor", "ended_after")


def _named(job: AuditedJob, row: Any) -> AuditedJob:
    calendars = row["calendars"]
    refs = tuple(msgspec.convert(calendars, list[CalendarRef])) if calendars else ()
    return replace(job, name=row["name"], queue=row["queue"], calendars=refs)


class Auditor:
    """Audits one window per `interval_s`, each ending `settle_s` ago, contiguous within a term."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        interval_s: float,
        settle_s: float,
        check: Callable[[], int] | None = None,
        foreground: Foreground | None = None,
    ) -> None:
        self._pool = pool
        self._foreground = foreground  # the leader's tick write: the pass waits while it runs
        self._check = check  # the leader's epoch (NotLeader when lost): missed ticks become job events
        self._interval = timedelta(seconds=interval_s)
        self._settle = timedelta(seconds=settle_s)
        self._audited_to: datetime | None = None

    async def run(self, term: Lifetime) -> None:
        while True:
            await term.sleep(self._interval.total_seconds())
            try:
                await self.once(datetime.now(UTC))
            except NotLeader:
                raise  # the term is over: its missed events are the next leader's to write
            except Exception as exc:  # auditing must never take the leader down: next pass retries
                log.warning("audit pass failed: %s", exc, exc_info=True, extra={"event": "audit.failed"})

    async def once(self, now: datetime) -> AuditResult:
        end = now - self._settle
        start = self._audited_to or end - self._interval
        if end <= start:
            return AuditResult((start, end))
        with translate_errors():
            async with self._pool.acquire() as conn:
                result = await self._audit(conn, (start, end))
        if self._check is not None and result.unaccounted:
            events = [health.missed(job_id, tick) for job_id, tick in result.unaccounted]
            await HealthStore(self._pool).missed(self._check(), events)
        self._audited_to = end
        await self._export(result)
        return result

    async def _audit(self, conn: Any, window: tuple[datetime, datetime]) -> AuditResult:
        """The window's audit from one snapshot: the jobs by schedule (AUDIT_SCHEDULES), each
        schedule's ticks computed once (`memo`, which reconcile reads), then the jobs that had one
        looked up and reconciled CHUNK at a time. The event loop (the leader's tick writes and lease
        renewal) runs every few ms (`Slices`): a pass over a million jobs is seconds of CPU, and
        held it 50-60 ms at a time, each tick write that came then that much longer."""
        start, end = window
        book = RuleBook.of(*await RuleStore(self._pool).load())
        result = AuditResult(window)
        memo: dict[tuple[object, ...], list[datetime] | None] = {}
        slices = Slices(foreground=self._foreground)
        due: list[AuditedJob] = []  # jobs with ticks in the window, not looked up yet
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            cursor = await conn.cursor(upkeep_q.AUDIT_SCHEDULES, start, end)
            while groups := await cursor.fetch(GROUPS):
                for group in groups:
                    await slices.next()
                    if unusable_row(group, _INSTANTS, "jobs", key="ids"):
                        continue  # the leader skips them too (cronos.store.ledger): none of their ticks is due
                    fields = {name: group[name] for name in _SCHEDULE_FIELDS}
                    # created_at: since when the jobs count (AUDIT_SCHEDULES' `after`), as reconcile reads it
                    first = AuditedJob(
                        id=0, created_at=group["after"], schedules=as_entries(group["schedules"]), **fields
                    )
                    if _by_name(first):
                        due += await self._each_named(conn, first, group["ids"], window, result, memo)
                        continue  # each job's name picks its `H`: their ticks differ
                    ticks = memo[_same_ticks(first, start)] = _expected(first, window)
                    if ticks is None:
                        continue  # the dispatcher does not run them either
                    if not ticks:
                        result.jobs += len(group["ids"])
                        continue
                    due += [replace(first, id=job_id) for job_id in group["ids"]]
                    while len(due) >= CHUNK:
                        await self._reconcile(conn, due[:CHUNK], window, book, result, memo)
                        del due[:CHUNK]
            if due:
                await self._reconcile(conn, due, window, book, result, memo)
        return result

    @staticmethod
    async def _each_named(
        conn: Any,
        first: AuditedJob,
        ids: list[int],
        window: tuple[datetime, datetime],
        result: AuditResult,
        memo: dict[tuple[object, ...], list[datetime] | None],
    ) -> list[AuditedJob]:
        """The jobs of a group whose expression has an `H`, each with its ticks (its name's): those
        with a tick in the window, to reconcile."""
        out = []
        for row in await conn.fetch(upkeep_q.AUDIT_JOB_NAMES, ids):
            job = replace(first, id=row["id"], name=row["name"])
            ticks = memo[_same_ticks(job, window[0])] = _expected(job, window)
            if ticks:
                out.append(job)
            elif ticks is not None:
                result.jobs += 1
        return out

    @staticmethod
    async def _reconcile(
        conn: Any,
        jobs: list[AuditedJob],
        window: tuple[datetime, datetime],
        book: RuleBook,
        result: AuditResult,
        memo: dict[tuple[object, ...], list[datetime] | None],
    ) -> None:
        """Look the jobs' ticks up in the ledger and add what reconcile finds to `result`."""
        start, end = window
        ids = [job.id for job in jobs]
        rows = await conn.fetch(upkeep_q.AUDIT_TICKS, ids, start, end)
        if book.calendars or book.windows:  # rules pick jobs by name, queue and calendars
            named = {r["id"]: r for r in await conn.fetch(upkeep_q.AUDIT_JOB_NAMES, ids)}
            jobs = [_named(job, named[job.id]) for job in jobs if job.id in named]
        part = reconcile(jobs, {(r["job_id"], r["scheduled_for"]) for r in rows}, window, book, memo)
        result.jobs += part.jobs
        result.expected += part.expected
        result.unaccounted += part.unaccounted
        result.start_delays_s += [r["start_delay_s"] for r in rows if r["start_delay_s"] is not None]

    async def _export(self, result: AuditResult) -> None:
        metrics.TICKS_EXPECTED.inc(result.expected)
        metrics.TICKS_UNACCOUNTED.inc(len(result.unaccounted))
        # A window of a million jobs holds ~60,000 delays: 50 ms of observing.
        slices = Slices(foreground=self._foreground)
        for delay in result.start_delays_s:
            metrics.TICK_START_DELAY.observe(delay)
            await slices.next()
        fields: dict[str, object] = {
            "window_start": result.window[0].isoformat(),
            "window_end": result.window[1].isoformat(),
            "jobs": result.jobs,
            "expected": result.expected,
        }
        if result.unaccounted:
            named = [f"job {j} at {t.isoformat()}" for j, t in result.unaccounted[:NAMED_LIMIT]]
            log.warning(
                "ticks with neither a run nor a recorded skip: %s",
                ", ".join(named),
                extra={"event": "audit.unaccounted", "unaccounted": len(result.unaccounted), **fields},
            )
        else:
            log.debug("every tick accounted for", extra={"event": "audit.ok", **fields})
