"""Which ticks to write for these jobs, their cursors and now. Pure: no I/O, no clock.

The loop around it reads the clock, plans, writes the ledger, pushes, sleeps. Jobs come
grouped by schedule; the fire times of a group are computed once per distinct cursor
(in steady state every job of a group shares one cursor, so once per group per tick).

The plan is columnar (one list per column) and cut into batches that each carry the
ticks *and* the cursors of whole jobs, so a batch can be written in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from cronos.misfire import ON_TIME_S, SKIP_REASON, decide, jitter_s
from cronos.models import MisfirePolicy

# Ticks one job contributes to one round; a long outage is caught up over several rounds.
JOB_ROUND_LIMIT = 1000
# Late runs of a catch-up are spread out at this rate instead of being pushed at once.
CATCH_UP_PER_S = 2000


class FireTimes(Protocol):
    def fire_times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]: ...


@dataclass(slots=True)
class JobSpec:
    """What the dispatcher keeps in memory per active job."""

    id: int
    expression: str
    timezone: str
    misfire_policy: MisfirePolicy
    misfire_grace_s: float
    jitter_s: float
    exclusive: bool
    cursor: datetime  # every tick at or before it is in the ledger

    @property
    def key(self) -> tuple[str, str]:
        return (self.expression, self.timezone)


@dataclass(slots=True)
class TickBatch:
    """Rows for one fenced transaction: ticks (queued or skipped), and each job's new cursor
    (its newest tick here: the ledger derives the same from the rows)."""

    job_ids: list[int] = field(default_factory=list)
    scheduled_for: list[datetime] = field(default_factory=list)
    due_at: list[datetime] = field(default_factory=list)
    skip_reason: list[str | None] = field(default_factory=list)
    cursor_ids: list[int] = field(default_factory=list)
    cursors: list[datetime] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.job_ids)


@dataclass(slots=True)
class Plan:
    batches: list[TickBatch]
    runs: int = 0
    skips: int = 0
    truncated: bool = False  # the round limit cut the plan: call again at once

    @property
    def empty(self) -> bool:
        return not self.batches


def _ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


def plan(
    groups: Iterable[tuple[FireTimes, Sequence[JobSpec]]],
    now: datetime,
    *,
    horizon: datetime | None = None,
    max_rows: int = 20_000,
    batch_rows: int = 2_000,
    job_limit: int = JOB_ROUND_LIMIT,
) -> Plan:
    """Plan every tick <= horizon (default: now) after each job's cursor, at most about `max_rows` rows.

    A horizon past `now` writes upcoming ticks ahead of time (queued, due later), so that
    their tokens can be pushed the moment they are due; lateness is judged against `now`.
    """
    result = Plan(batches=[])
    for batch in iter_plan(
        result, groups, now, horizon=horizon, max_rows=max_rows, batch_rows=batch_rows, job_limit=job_limit
    ):
        result.batches.append(batch)
    return result


def iter_plan(
    result: Plan,
    groups: Iterable[tuple[FireTimes, Sequence[JobSpec]]],
    now: datetime,
    *,
    horizon: datetime | None = None,
    max_rows: int = 20_000,
    batch_rows: int = 2_000,
    job_limit: int = JOB_ROUND_LIMIT,
) -> Iterator[TickBatch]:
    """`plan`, one batch at a time (so the caller writes batch k while batch k+1 is planned).

    Counts and the truncated flag accumulate in `result`; its `batches` are left alone.
    """
    until = now if horizon is None else max(horizon, now)
    late_before = now - timedelta(seconds=ON_TIME_S)
    batch = TickBatch()
    late_runs = 0
    for schedule, jobs in groups:
        by_cursor: dict[datetime, list[JobSpec]] = {}
        for job in jobs:
            by_cursor.setdefault(job.cursor, []).append(job)
        for cursor, members in by_cursor.items():
            if result.runs + result.skips >= max_rows:
                result.truncated = True
                break
            ticks = schedule.fire_times(cursor, until, job_limit + 1)
            if not ticks:
                continue
            complete = len(ticks) <= job_limit
            ticks = ticks[:job_limit]
            # Decisions depend on the policy and grace only: computed once per pair, not per job.
            decided: dict[tuple[str, float], list[str | None]] = {}
            for job in members:
                reasons = decided.get((job.misfire_policy, job.misfire_grace_s))
                if reasons is None:
                    reasons = [
                        None if d == "run" else SKIP_REASON
                        for d in decide(job.misfire_policy, ticks, now, job.misfire_grace_s, complete=complete)
                    ]
                    decided[(job.misfire_policy, job.misfire_grace_s)] = reasons
                for tick, reason in zip(ticks, reasons, strict=True):
                    due = tick
                    if job.jitter_s > 0:
                        due = tick + timedelta(seconds=jitter_s(job.id, _ms(tick), job.jitter_s))
                    if reason is None:
                        if due < late_before:  # a late run: spread the catch-up out
                            due = max(due, now + timedelta(seconds=late_runs / CATCH_UP_PER_S))
                            late_runs += 1
                        result.runs += 1
                    else:
                        result.skips += 1
                    batch.job_ids.append(job.id)
                    batch.scheduled_for.append(tick)
                    batch.due_at.append(due)
                    batch.skip_reason.append(reason)
                batch.cursor_ids.append(job.id)
                batch.cursors.append(ticks[-1])
                if len(batch) >= batch_rows:
                    yield batch
                    batch = TickBatch()
            if not complete:
                result.truncated = True
        if result.runs + result.skips >= max_rows:
            result.truncated = True
            break
    if len(batch) or batch.cursor_ids:
        yield batch
