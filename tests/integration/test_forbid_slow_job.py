"""A `forbid` job slower than its schedule on a real dispatcher and executor (issue 38): once its
runs fall behind, the newest tick starts as soon as the running run ends and the older ones are
skipped, instead of every tick waiting its turn in a line that only the grace ends.

One every-2-seconds job whose task sleeps 3 s, its first ticks written 6 s late (a leader away, an
outage): that run starts late, so the runs behind it wait for it (lifecycle.forbid_deadline). In
the 10-minute soak of issue 38 121 ticks of such a job started each ~29 s late. Before the fix this
test saw the line grow: runs 6, 8, 10 ... s late and 4-5 runs of the job pending.
"""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest

from cronos.models import SKIP_PENDING
from cronos.settings import Settings
from tests.integration.test_waiting_runs import cluster
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

LATE_START_S = 6  # how late the job's first ticks are written
WATCHED_S = 24.0  # runs starting this long after the job's creation are on time again (the catch-up drained)
ON_TIME_S = 2.5  # a run waits at most for its predecessor's end (3 s runs, 2 s ticks): 1 s, and a margin


async def add_slow_job(pool: asyncpg.Pool) -> int:
    """An every-2-seconds job of the default policies whose task sleeps 3 s, its cursor 6 s back."""
    async with pool.acquire() as conn, conn.transaction():
        job_id = await conn.fetchval(
            "INSERT INTO jobs (name, cron_expression, payload, timeout_s, misfire_grace_s, last_scheduled_for)"
            " VALUES ('slow', '*/2 * * * * *', $1, 60, 60, now() - make_interval(secs => $2)) RETURNING id",
            {"action": "sleep", "seconds": 3},
            LATE_START_S,
        )
        await conn.execute("SELECT pg_notify('cronos_jobs', $1)", f'{{"op": "created", "job_id": {job_id}}}')
    return int(job_id)


async def test_the_newest_tick_of_a_slow_forbid_job_starts_when_the_running_one_ends(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with cluster(settings):
        job = await add_slow_job(pg_pool)
        created = await pg_pool.fetchval("SELECT created_at FROM jobs WHERE id = $1", job)
        watched = created + timedelta(seconds=WATCHED_S)
        most_pending = 0

        async def watched_runs() -> bool:
            nonlocal most_pending
            pending = await pg_pool.fetchval(
                "SELECT count(*) FROM runs WHERE job_id = $1 AND state IN ('queued', 'waiting') AND due_at < now()",
                job,
            )
            if await pg_pool.fetchval("SELECT now() > $1", watched):
                most_pending = max(most_pending, int(pending))
            started = await pg_pool.fetchval(
                "SELECT count(*) FROM runs WHERE job_id = $1 AND started_at > $2", job, watched
            )
            return int(started) >= 3

        await wait_for(watched_runs, timeout=75, interval=0.2, what="three runs started after the line formed")
        rows = await pg_pool.fetch(
            "SELECT scheduled_for, started_at, extract(epoch FROM started_at - scheduled_for) AS late_s FROM runs"
            " WHERE job_id = $1 AND started_at > $2 ORDER BY scheduled_for",
            job,
            watched,
        )
        skipped = await pg_pool.fetch(
            "SELECT skip_reason FROM runs WHERE job_id = $1 AND state = 'skipped' AND skip_reason = $2",
            job,
            SKIP_PENDING,
        )
    late = [round(float(r["late_s"]), 1) for r in rows]
    assert max(late) <= ON_TIME_S, f"runs started {late} s after their tick"
    # One waiting behind the running run, and the next tick's, queued before the one waiting was
    # overdue by lifecycle.overdue_before: two at most (before: a line that grew until the grace).
    assert most_pending <= 2, f"{most_pending} runs of the job pending at once"
    assert skipped, "the ticks that could not run are recorded skipped"
