"""Job health in PostgreSQL: the facts the leader's evaluator judges (cronos.health decides), and
its writes — events, health rows and the scan's watermark — in one fenced transaction.

Nothing here runs per run on the hot path: the scans read a partial index of the runs that ended
unhappily (completed ones are not in it), the running runs, and the runs of the jobs that have
expectations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from cronos import selectors
from cronos.events import RUN_KINDS, JobEvent
from cronos.health import Ended, Health, Success
from cronos.models import Expectations
from cronos.store.db import translate_errors
from cronos.store.epoch import fenced
from cronos.store.events import insert_events
from cronos.store.queries import health as health_q

ENDED_BATCH = 5000
ENDED_PER_PASS = 50_000
RECENT_RUNS = 50  # a job's newest success is looked for among its newest runs (a bounded read)
RUNS_PER_JOB = 200  # runs of a job with expectations judged per pass


@dataclass(frozen=True, slots=True)
class Expecting:
    """A job with expectations, or whose channels ask for run events, as the evaluator reads it."""

    job_id: int
    expectations: Expectations | None
    revision: int
    status: str
    updated_at: datetime
    judged_run_id: int


@dataclass(frozen=True, slots=True)
class Running:
    run_id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    revision: int | None
    started_at: datetime
    timeout_s: float
    expectations: Expectations | None  # the job's now (see `expectations_at` for the run's revision's)
    job_revision: int
    now: datetime


@dataclass(frozen=True, slots=True)
class JobHealthView:
    """A job's health as the API shows it (no row: never judged)."""

    job_id: int
    row: Health | None
    updated_at: datetime | None
    newest_success: datetime | None


def expectations_of(value: Any) -> Expectations | None:
    if value is None:
        return None
    return msgspec.convert(value, Expectations)


def _health(row: Any) -> Health:
    return Health(
        job_id=row["job_id"], verdict=row["verdict"], reason=row["reason"],
        consecutive_failures=row["consecutive_failures"], last_success_at=row["last_success_at"],
        last_failure_at=row["last_failure_at"], last_failure_run_id=row["last_failure_run_id"],
        missed_at=row["missed_at"], judged_run_id=row["judged_run_id"],
    )  # fmt: skip


class HealthStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def _newest(self, sql: str, *args: Any) -> list[Any]:
        """A read of jobs' newest runs, planned as a merge of the partitions' indexes (HEALTH_PLAN)."""
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(health_q.HEALTH_PLAN)
                rows: list[Any] = await conn.fetch(sql, *args)
        return rows

    async def scan_from(self) -> tuple[datetime, datetime]:
        """How far the last scan went, and PostgreSQL's clock now."""
        with translate_errors():
            row = await self._pool.fetchrow(health_q.HEALTH_SCAN_FROM)
        assert row is not None  # made by migration 0028
        return row["scanned_to"], row["now"]

    async def ended(
        self, after: tuple[datetime, int], until: datetime
    ) -> tuple[list[Ended], tuple[datetime, int] | None]:
        """Runs that ended failed, skipped or cancelled after `after` (end, run id) and by `until`,
        in end order, at most ENDED_PER_PASS (a leader back after a long outage catches up over
        several passes); and where to go on from when there are more (None: all read)."""
        out: list[Ended] = []
        last_at, last_id = after
        with translate_errors():
            while len(out) < ENDED_PER_PASS:
                rows = await self._pool.fetch(health_q.HEALTH_ENDED, last_at, last_id, until, ENDED_BATCH)
                out.extend(Ended(**dict(r)) for r in rows)
                if len(rows) < ENDED_BATCH:
                    return out, None
                last_at, last_id = rows[-1]["finished_at"], rows[-1]["run_id"]
        return out, (last_at, last_id)

    async def rows(self, job_ids: Iterable[int]) -> dict[int, Health]:
        """The health rows of these jobs, and every row whose verdict is not ok."""
        with translate_errors():
            rows = await self._pool.fetch(health_q.HEALTH_ROWS, sorted(set(job_ids)))
        return {r["job_id"]: _health(r) for r in rows}

    async def newest_success(self, job_ids: Iterable[int]) -> dict[int, Success]:
        ids = sorted(set(job_ids))
        if not ids:
            return {}
        rows = await self._newest(health_q.HEALTH_NEWEST_SUCCESS, ids, RECENT_RUNS)
        return {r["job_id"]: Success(r["run_id"], r["finished_at"]) for r in rows}

    async def expecting(self, announcing: Iterable[int] = ()) -> list[Expecting]:
        """The jobs with expectations, and the jobs `announcing` (whose runs are announced)."""
        announced = set(announcing)
        with translate_errors():
            rows = await self._pool.fetch(health_q.HEALTH_EXPECTING, sorted(announced))
        out = []
        for r in rows:
            exp = expectations_of(r["expectations"])
            if exp is not None or r["job_id"] in announced:
                out.append(Expecting(r["job_id"], exp, r["revision"], r["status"], r["updated_at"], r["judged_run_id"]))
        return out

    async def announcing(self) -> dict[int, frozenset[str]]:
        """The jobs some enabled channel asks run events of (cronos.events.RUN_KINDS), with the kinds
        asked: only these jobs' runs are read for them. Nothing but one small read without such a channel."""
        kinds: dict[int, set[str]] = {}
        with translate_errors():
            for channel in await self._pool.fetch(health_q.HEALTH_ANNOUNCING_CHANNELS):
                asked = RUN_KINDS.intersection(channel["events"])
                selector = channel["selector"]
                every = channel["job_ids"] is None and channel["queues"] is None and selector is None
                path = None if selector is None else selectors.jsonpath(selectors.parse(selector))
                rows = await self._pool.fetch(
                    health_q.HEALTH_ANNOUNCING_JOBS, every, channel["job_ids"] or [], channel["queues"] or [], path
                )
                for row in rows:
                    kinds.setdefault(row["id"], set()).update(asked)
        return {job: frozenset(asked) for job, asked in kinds.items()}

    async def runs_after(self, after: Sequence[tuple[int, int]]) -> list[Any]:
        """Runs of each (job, run id) after that run id, by job then id (RUNS_PER_JOB a job)."""
        if not after:
            return []
        return await self._newest(
            health_q.HEALTH_RUNS_AFTER, [a[0] for a in after], [a[1] for a in after], RUNS_PER_JOB
        )

    async def expectations_at(self, pairs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], Expectations]:
        """The expectations in force at each (job, revision); absent: none then."""
        keys = sorted(set(pairs))
        if not keys:
            return {}
        with translate_errors():
            rows = await self._pool.fetch(health_q.HEALTH_EXPECTATIONS_AT, [k[0] for k in keys], [k[1] for k in keys])
        found = {(r["job_id"], r["number"]): expectations_of(r["expectations"]) for r in rows}
        return {k: v for k, v in found.items() if v is not None}

    async def running(self) -> list[Running]:
        with translate_errors():
            rows = await self._pool.fetch(health_q.HEALTH_RUNNING)
        return [Running(**{**dict(r), "expectations": expectations_of(r["expectations"])}) for r in rows]

    async def write(self, epoch: int, events: Sequence[JobEvent], rows: Sequence[Health], scanned_to: datetime) -> int:
        """Events (each fact once), health rows and the scan's watermark, fenced; how many events were new."""
        try:
            return await self._write(epoch, events, rows, scanned_to)
        except asyncpg.ForeignKeyViolationError:
            # A job deleted while its row was written: the upsert's join saw it, its key check the
            # deletion. Again at once, the join leaves it out. (Locking the jobs, as the events'
            # insert does, would lock one per changed row, every success's; the key check locks
            # only the new rows'.)
            return await self._write(epoch, events, rows, scanned_to)

    async def _write(self, epoch: int, events: Sequence[JobEvent], rows: Sequence[Health], scanned_to: datetime) -> int:
        async with fenced(self._pool, epoch) as conn:
            new = await insert_events(conn, events)
            if rows:
                await conn.execute(
                    health_q.HEALTH_UPSERT,
                    [h.job_id for h in rows], [h.verdict for h in rows], [h.reason for h in rows],
                    [h.consecutive_failures for h in rows], [h.last_success_at for h in rows],
                    [h.last_failure_at for h in rows], [h.last_failure_run_id for h in rows],
                    [h.missed_at for h in rows], [h.judged_run_id for h in rows],
                )  # fmt: skip
            await conn.execute(health_q.HEALTH_SCAN_MOVE, scanned_to)
        return new

    async def missed(self, epoch: int, events: Sequence[JobEvent]) -> int:
        """The auditor's missed ticks: their events and each job's newest one on its row, fenced."""
        newest: dict[int, datetime] = {}
        for e in events:
            newest[e.job_id] = max(newest.get(e.job_id, e.occurred_at), e.occurred_at)
        async with fenced(self._pool, epoch) as conn:
            new = await insert_events(conn, events)
            if newest:
                await conn.execute(health_q.HEALTH_MISSED, list(newest), list(newest.values()))
        return new

    async def of_jobs(self, job_ids: Sequence[int]) -> list[JobHealthView]:
        """The API's views of these jobs' health, by id (a job that does not exist is left out)."""
        views = []
        for row in await self._newest(health_q.HEALTH_OF_JOBS, list(job_ids), RECENT_RUNS):
            health = None
            if row["verdict"] is not None:
                health = Health(
                    job_id=row["job_id"], verdict=row["verdict"], reason=row["reason"],
                    consecutive_failures=row["consecutive_failures"], last_success_at=row["last_success_at"],
                    last_failure_at=row["last_failure_at"], missed_at=row["missed_at"],
                )  # fmt: skip
            views.append(JobHealthView(row["job_id"], health, row["updated_at"], row["newest_success"]))
        return views

    async def metrics(self, patterns: Sequence[str], cap: int) -> list[Any]:
        return await self._newest(health_q.HEALTH_METRICS, list(patterns), cap, RECENT_RUNS)
