"""The dispatcher's side of the runs ledger: load jobs, write ticks, find queued runs to push.

Every write is fenced: it runs in a transaction that first takes the leader epoch row
FOR SHARE and compares it with the caller's epoch, so a deposed leader (paused past its
ttl, partitioned) writes nothing and gets NotLeader. Rows are columns in, Structs out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import msgspec

from cronos import metrics
from cronos.lifecycle import ON_TIME_S
from cronos.models import DEFAULT_QUEUE, SKIP_MISFIRED, DispatchJob
from cronos.store import queries as q
from cronos.store.db import retry_contention, translate_errors
from cronos.store.epoch import fenced

# Where a re-push goes on: the (due_at, id) of the last run pushed.
RepushCursor = tuple[datetime, int]
REPUSH_START: RepushCursor = (datetime(1970, 1, 1, tzinfo=UTC), 0)


class QueuedRun(msgspec.Struct, frozen=True, array_like=True):
    """A queued run as the stream needs it (times in UTC epoch ms)."""

    id: int
    job_id: int
    scheduled_for_ms: int
    attempt: int
    trigger: str
    due_ms: int
    queue: str = DEFAULT_QUEUE  # its job's: the stream its token goes to


class TickResult(msgspec.Struct, kw_only=True):
    queued: list[QueuedRun]  # new queued runs, marked pushed by this epoch
    skipped: int  # new skipped ("misfired") runs
    ended: list[int] = []  # jobs this write ended (completed, expired)


def _job(row: Any) -> DispatchJob:
    return DispatchJob(
        id=row[0],
        cron_expression=row[1],
        timezone=row[2],
        misfire_policy=row[3],
        misfire_grace_s=row[4],
        jitter_s=row[5],
        concurrency_policy=row[6],
        status=row[7],
        cursor=row[8],
        revision=row[9],
        plan_revision=row[10],
        run_at=row[11],
        start_at=row[12],
        end_at=row[13],
        runs_left=row[14],
        catchup_max_per_s=row[15],
    )


def _queued(row: Any) -> QueuedRun:
    return QueuedRun(row[0], row[1], row[2], row[3], row[4], row[5], row[6])


async def _misfire(conn: Any, rows: Sequence[Any]) -> set[int]:
    """End the runs of `rows` that their misfire policy does not run any more (QUEUED_MISFIRE);
    their ids, left out of the push."""
    if not rows:
        return set()
    skipped = {r[0] for r in await conn.fetch(q.QUEUED_MISFIRE, [r["id"] for r in rows], SKIP_MISFIRED, ON_TIME_S)}
    metrics.RUNS_SKIPPED.labels(reason=SKIP_MISFIRED).inc(len(skipped))
    return skipped


class Ledger:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def active_jobs(self) -> list[DispatchJob]:
        with translate_errors():
            async with self._pool.acquire() as conn:
                rows = await conn.fetch(q.DISPATCH_JOBS_ACTIVE)
        return [_job(r) for r in rows]

    async def jobs(self, ids: Sequence[int]) -> list[DispatchJob]:
        """These jobs as they are now; missing ids were deleted."""
        with translate_errors():
            rows = await self._pool.fetch(q.DISPATCH_JOBS_BY_ID, list(ids))
        return [_job(r) for r in rows]

    async def changed_since(self, since: datetime) -> list[DispatchJob]:
        """Jobs created, edited, paused or resumed after `since` (as active or paused)."""
        with translate_errors():
            rows = await self._pool.fetch(q.DISPATCH_JOBS_CHANGED, since)
        return [_job(r) for r in rows]

    async def active_digest(self) -> tuple[int, int, datetime]:
        """(count, sum of ids) of the active jobs, and the database's now()."""
        with translate_errors():
            row = await self._pool.fetchrow(q.DISPATCH_ACTIVE_DIGEST)
        assert row is not None
        return int(row[0]), int(row[1]), row[2]

    async def write_ticks(
        self,
        epoch: int,
        job_ids: Sequence[int],
        scheduled_for: Sequence[datetime],
        due_at: Sequence[datetime],
        skip_reason: Sequence[str | None],
        revision: Sequence[int],
        ended: Mapping[int, tuple[str, int]] | None = None,
    ) -> TickResult:
        """Insert ticks (queued or skipped), each with the job revision that planned it, and move
        each job's cursor to its newest one, in one fenced transaction. Jobs no longer active, or
        whose schedule changed after the revision that planned their ticks, get nothing. Jobs in
        `ended` (id -> terminal status, planning revision) end in the same transaction."""
        queued: list[QueuedRun] = []
        skipped = 0
        ended_ids: list[int] = []

        async def attempt() -> list[Any]:
            # Two writers whose batches share a job (a long catch-up spans batches) may lock its
            # row in opposite orders: PostgreSQL rolls one back, and it is written again.
            async with fenced(self._pool, epoch) as conn:
                rows = await conn.fetch(q.TICKS_WRITE, epoch, job_ids, scheduled_for, due_at, skip_reason, revision)
                if ended:
                    ids = list(ended)
                    done = await conn.fetch(q.JOBS_END, ids, [ended[i][0] for i in ids], [ended[i][1] for i in ids])
                    ended_ids[:] = [r[0] for r in done]
            return rows  # type: ignore[no-any-return]

        for row in await retry_contention(attempt, "tick write"):
            if row[4] == "queued":
                queued.append(QueuedRun(row[0], row[1], row[2], 1, "schedule", row[3], row[5]))
            else:
                skipped += 1
        return TickResult(queued=queued, skipped=skipped, ended=ended_ids)

    async def take_due(self, epoch: int, now: datetime, limit: int = 5000) -> list[QueuedRun]:
        """Queued runs never pushed (manual triggers, retries, later-due runs) that are due."""

        async def attempt() -> list[Any]:
            async with fenced(self._pool, epoch) as conn:
                return await conn.fetch(q.QUEUED_TAKE_DUE, epoch, now, limit)  # type: ignore[no-any-return]

        return [_queued(r) for r in await retry_contention(attempt, "take due runs")]

    async def next_due(self) -> datetime | None:
        """The due time of the oldest queued run nobody pushed yet."""
        with translate_errors():
            value = await self._pool.fetchval(q.QUEUED_NEXT_DUE)
        return value  # type: ignore[no-any-return]

    async def repush(
        self, epoch: int, now: datetime, after: RepushCursor = REPUSH_START, limit: int = 5000
    ) -> tuple[list[QueuedRun], RepushCursor | None]:
        """One page, in due order, of every queued run due by `now` past `after`, marked for this
        epoch (but those the misfire policy ends now); and the cursor of the next page, None after
        the last."""
        async with fenced(self._pool, epoch) as conn:
            await conn.execute(q.REPUSH_PLAN)
            rows = await conn.fetch(q.QUEUED_REPUSH, epoch, now, after[0], after[1], limit)
            misfired = await _misfire(conn, rows)
        rows = sorted(rows, key=lambda r: (r["due_at"], r["id"]))
        cursor = (rows[-1]["due_at"], rows[-1]["id"]) if len(rows) == limit else None
        return [_queued(r) for r in rows if r["id"] not in misfired], cursor

    async def overdue_pushed(
        self, epoch: int, late_s: float, leave_out: Sequence[int], limit: int = 1000, queues_out: Sequence[str] = ()
    ) -> list[QueuedRun]:
        """Queued runs pushed but unclaimed `late_s` past due (by PostgreSQL's clock), oldest
        first, but those in `leave_out` and those of jobs in `queues_out`; marked pushed by
        `epoch` (fenced)."""
        async with fenced(self._pool, epoch) as conn:
            await conn.execute(q.REPUSH_PLAN)
            rows = await conn.fetch(q.QUEUED_OVERDUE_REPUSH, epoch, late_s, list(leave_out), limit, list(queues_out))
            misfired = await _misfire(conn, rows)
        return sorted((_queued(r) for r in rows if r["id"] not in misfired), key=lambda r: (r.due_ms, r.id))

    async def unmark_future(self, epoch: int, now: datetime) -> int:
        """Hand runs due after `now` that an earlier leader meant to push back to the due watcher."""
        async with fenced(self._pool, epoch) as conn:
            status = await conn.execute(q.QUEUED_UNMARK_FUTURE, now)
        return int(status.split()[-1])
