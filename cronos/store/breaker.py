"""The circuit breaker's statements and its fenced trip (issue 40; decisions in cronos.breaker).

The leader reads the active jobs whose failures in a row (job_health, kept by the health
evaluator) reach the threshold, asks cronos.breaker, and pauses those it trips as a pause by hand
does: a revision and an audit entry by the `dispatcher`, the note saying why, and a
`paused_by_breaker` job event that notification channels can hear. Nothing here is on the run path.
"""

from __future__ import annotations

import logging
from datetime import datetime

import asyncpg
import msgspec

from cronos import breaker
from cronos.events import JobEvent, JobEventKind
from cronos.models import Job
from cronos.store import revisions
from cronos.store.audit import record, snapshot
from cronos.store.db import to_struct
from cronos.store.epoch import fenced
from cronos.store.events import insert_events
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import notifications as notifications_q

log = logging.getLogger("cronos.store.breaker")

LEADER = "dispatcher"  # the actor of the breaker's pauses

# Active jobs failing at least $1 times in a row, with the breaker's last trip, a page of them
# after id $3; locked (a pause or edit by hand in flight is left for the next pass).
CANDIDATES = """
SELECT j.id, j.name, j.cron_expression, j.timezone, j.kind, j.payload, j.timeout_s, j.max_retries,
    j.retry_backoff_s, j.concurrency_policy, j.misfire_policy, j.misfire_grace_s, j.jitter_s, j.status, j.revision,
    j.last_scheduled_for, j.created_at, j.updated_at, j.managed_by, j.parents, j.queue, j.run_at, j.start_at,
    j.end_at, j.max_runs, j.catchup_max_per_s, j.expectations, j.every, j.anchor, j.calendars, j.paused_until,
    j.pause_note, j.labels, j.owner, j.concurrency_group, j.schedules,
    h.consecutive_failures, h.last_success_at, h.last_failure_at, b.tripped_at, b.tripped_streak
FROM job_health h
JOIN jobs j ON j.id = h.job_id
LEFT JOIN job_breakers b ON b.job_id = h.job_id
WHERE h.consecutive_failures >= $1 AND j.status = 'active' AND j.id > $3
ORDER BY j.id
LIMIT $2
FOR UPDATE OF j SKIP LOCKED
"""
TRIP_RECORD = """
INSERT INTO job_breakers (job_id, tripped_at, tripped_streak) VALUES ($1, $2, $3)
ON CONFLICT (job_id) DO UPDATE SET tripped_at = EXCLUDED.tripped_at, tripped_streak = EXCLUDED.tripped_streak
"""


def _facts(row: asyncpg.Record) -> breaker.Facts:
    last = None if row["tripped_at"] is None else breaker.Trip(row["tripped_at"], row["tripped_streak"])
    return breaker.Facts(row["status"], row["consecutive_failures"], row["last_success_at"], last)


async def trip_due(
    pool: asyncpg.Pool, epoch: int, threshold: int, now: datetime, *, after: int = 0, limit: int = 100
) -> tuple[list[Job], int | None]:
    """Pause the jobs of one page (ids above `after`) the breaker trips at `threshold`; returns them
    and the id to read on from (None: the last page). NotLeader unless `epoch` is current."""
    if threshold <= 0:
        return [], None
    paused: list[Job] = []
    async with fenced(pool, epoch) as conn:
        rows = await conn.fetch(CANDIDATES, threshold, limit, after)
        for row in rows:
            facts = _facts(row)
            if not breaker.trips(facts, threshold):
                continue
            current = to_struct(row, Job)
            note = breaker.note(facts, threshold)
            new = await conn.fetchrow(jobs_q.JOB_SET_STATUS, current.id, "paused", current.revision + 1, None, note)
            job = to_struct(new, Job)
            await revisions.record(conn, job, "paused", LEADER, {"status": "paused", "pause_note": note})
            await revisions.hand_over(conn, job, schedule_changed=False)
            detail = {"consecutive_failures": facts.streak, "threshold": threshold, "pause_note": note}
            await record(
                conn, LEADER, "job", "paused", job_id=job.id, before=snapshot(current), after=snapshot(job),
                detail={"breaker": detail},
            )  # fmt: skip
            await conn.execute(TRIP_RECORD, job.id, now, facts.streak)
            at = row["last_failure_at"] or now
            await insert_events(conn, [JobEvent(
                job.id, JobEventKind.PAUSED_BY_BREAKER, at, f"paused_by_breaker:{job.id}:{job.revision}", None, detail,
            )])  # fmt: skip
            await conn.execute(notifications_q.NOTIFY, msgspec.json.encode({"op": "paused", "job_id": job.id}).decode())
            paused.append(job)
    return paused, (rows[-1]["id"] if len(rows) == limit else None)
