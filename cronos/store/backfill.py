"""Backfill: queue runs for a job's past ticks (cronos.backfill decides which and when; this applies).

Under the job's re-run lock (the one a re-run by trigger takes, so the two never pick the same
attempt), in one transaction: the job's row share-locked, its kind guarded, the ledger's facts
about the ticks read, the ticks chosen, their runs queued (trigger `backfill`, each due at its
paced instant; the leader's outbox releases them when due), one audit entry and the leader's
NOTIFY. A dry run reads the same facts and writes nothing.

Bounded (cronos.backfill.Limits): under the caller's backfill lock as well, the backfills of the
job and of the caller still releasing runs are counted (their audit entries' `until`) before any
is queued, so two requests at once cannot both pass a limit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import msgspec

from cronos import backfill, lifecycle
from cronos.backfill import BackfillTick, Mode, TickFacts
from cronos.errors import NotFound
from cronos.models import Job
from cronos.store.audit import record
from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import runs as runs_q

log = logging.getLogger("cronos.store.backfill")

Guard = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Request:
    """A backfill as asked: the job, [start, end), the mode, its ticks as planned, the pace."""

    job_id: int
    start: datetime
    end: datetime
    mode: Mode
    planned: Sequence[datetime]
    pace: float | None  # runs a second; None: the job's catch-up pace, else `default_pace`
    dry_run: bool
    limits: backfill.Limits


async def run(
    pool: asyncpg.Pool, ask: Request, now: datetime, default_pace: float, *, actor: str, guard: Guard
) -> tuple[float, list[BackfillTick]]:
    """The pace used and the ticks chosen (queued, with their run ids, unless a dry run)."""
    with translate_errors():
        async with pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(jobs_q.JOB_GET_KEY_SHARE, ask.job_id)
            if row is None:
                raise NotFound(f"job {ask.job_id} not found")
            job = to_struct(row, Job)
            guard(job.kind)
            pace = backfill.pace_of(ask.pace, job.catchup_max_per_s, default_pace, ask.limits)
            if not ask.dry_run:
                await conn.execute(runs_q.RERUN_LOCK, ask.job_id)
                await conn.execute(jobs_q.BACKFILL_CALLER_LOCK, actor)
                active = await conn.fetchrow(jobs_q.BACKFILLS_ACTIVE, ask.job_id, actor, now)
                backfill.check_crowding(active["of_job"], active["of_caller"], ask.limits)
            rows = await conn.fetch(jobs_q.BACKFILL_TICK_FACTS, ask.job_id, ask.start, ask.end)
            facts = {r["scheduled_for"]: to_struct(r, TickFacts) for r in rows}
            chosen = backfill.select(ask.job_id, ask.mode, ask.planned, facts, now, pace)
            backfill.check_runs(chosen, ask.limits)
            if ask.dry_run or not chosen:
                return pace, chosen
            chosen = await _queue(conn, job, chosen)
            queued = [t for t in chosen if t.run_id is not None]
            detail = {"mode": ask.mode, "from": ask.start, "to": ask.end, "pace_per_s": pace, "queued": len(queued),
                      "first": queued[0].scheduled_for if queued else None,
                      "last": queued[-1].scheduled_for if queued else None,
                      "until": backfill.until(queued)}  # fmt: skip
            await record(conn, actor, "job", "backfilled", job_id=job.id, detail=detail)
            if queued:
                await conn.execute(
                    notifications_q.NOTIFY, msgspec.json.encode({"op": "triggered", "job_id": job.id}).decode()
                )
    log.info(
        "job backfilled",
        extra={"event": "job.backfilled", "job_id": job.id, "actor": actor, "mode": ask.mode, "queued": len(queued),
               "pace_per_s": pace},
    )  # fmt: skip
    return pace, chosen


async def _queue(conn: asyncpg.Connection, job: Job, chosen: list[BackfillTick]) -> list[BackfillTick]:
    """Queue the chosen ticks' runs; a tick the leader wrote meanwhile is shown busy."""
    todo = [t for t in chosen if t.action == "queue"]
    n = len(todo)
    rows = await conn.fetch(
        runs_q.RUNS_QUEUE, [job.id] * n, [t.scheduled_for for t in todo], [t.attempt for t in todo], ["backfill"] * n,
        [t.due_at for t in todo], [job.revision] * n, [None] * n,
        [lifecycle.expiry(t.due_at or t.scheduled_for, job.misfire_grace_s) for t in todo], [None] * n,
    )  # fmt: skip
    ids = {(r["scheduled_for"], r["attempt"]): r["id"] for r in rows}
    queued = [ids[(t.scheduled_for, t.attempt)] for t in todo if (t.scheduled_for, t.attempt) in ids]
    if parked := backfill.to_wait(job.concurrency_policy, queued):
        await conn.fetch(runs_q.RUNS_WAIT, parked)  # never pushed: no token to acknowledge, no tick lock
    out = []
    for tick in chosen:
        if tick.action == "queue":
            run_id = ids.get((tick.scheduled_for, tick.attempt))
            changes = {"run_id": run_id} if run_id is not None else {"action": "busy", "due_at": None}
            tick = msgspec.structs.replace(tick, **changes)
        out.append(tick)
    return out
