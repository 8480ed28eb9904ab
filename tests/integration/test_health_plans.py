"""The health evaluator's reads cost what they find, not the ledger's size: a stale-statistics
ledger of 20,000 completed and 20,000 queued runs (tests/integration/test_query_plans.py), a few
failed and running ones; each statement's plan reads rows in proportion to its answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg

from cronos.store.health import RECENT_RUNS
from cronos.store.queries import health as health_q
from tests.integration.test_query_plans import backlog, rows_read

__all__ = ["backlog"]  # the fixture


async def test_the_evaluators_statements_read_in_proportion_to_what_they_find(
    pg_pool: asyncpg.Pool, backlog: list[int]
) -> None:
    jobs = [r["id"] for r in await pg_pool.fetch("SELECT id FROM jobs ORDER BY id")]
    await pg_pool.execute(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, started_at, finished_at, error)"
        " SELECT $1::bigint + g % 10, now() - g * interval '1 s', 1, 'schedule', 'failed', now(), now(), now(), 'x'"
        " FROM generate_series(1, 10) g",
        jobs[0],
    )
    await pg_pool.execute(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, started_at, lease_until, exclusive)"
        " SELECT $1::bigint + 20 + g, now() - g * interval '1 s', 1, 'schedule', 'running', now(), now(),"
        " now() + interval '1 minute', false FROM generate_series(1, 5) g",
        jobs[0],
    )
    await pg_pool.execute("UPDATE jobs SET expectations = '{\"start_within_s\": 5}' WHERE id = ANY($1)", jobs[:3])
    since = datetime.now(UTC) - timedelta(minutes=1)
    read = {
        "HEALTH_ENDED": await rows_read(
            pg_pool, health_q.HEALTH_ENDED, since, 0, datetime.now(UTC) + timedelta(1), 5000
        ),
        "HEALTH_RUNNING": await rows_read(pg_pool, health_q.HEALTH_RUNNING),
        "HEALTH_NEWEST_SUCCESS": await rows_read(
            pg_pool, health_q.HEALTH_NEWEST_SUCCESS, jobs[:10], RECENT_RUNS, prelude=health_q.HEALTH_PLAN
        ),
        "HEALTH_OF_JOBS": await rows_read(
            pg_pool, health_q.HEALTH_OF_JOBS, jobs[:10], RECENT_RUNS, prelude=health_q.HEALTH_PLAN
        ),
        "HEALTH_RUNS_AFTER": await rows_read(
            pg_pool,
            health_q.HEALTH_RUNS_AFTER,
            jobs[:3],
            [0, backlog[-1] - 50, backlog[-1]],
            20,
            prelude=health_q.HEALTH_PLAN,
        ),
        "HEALTH_METRICS": await rows_read(
            pg_pool, health_q.HEALTH_METRICS, [], 10, RECENT_RUNS, prelude=health_q.HEALTH_PLAN
        ),
    }
    # 10 failures (with their retry probes), 5 running, 10 jobs x 50 newest, 3 jobs x at most 20 (a
    # fresh one from its newest 20, not its whole history), 10 jobs x 50 newest.
    bounds = {"HEALTH_ENDED": 40, "HEALTH_RUNNING": 20, "HEALTH_NEWEST_SUCCESS": 10 * RECENT_RUNS + 50,
              "HEALTH_RUNS_AFTER": 3 * 20 + 50, "HEALTH_OF_JOBS": 10 * RECENT_RUNS + 50,
              "HEALTH_METRICS": 10 * RECENT_RUNS + 50}  # fmt: skip
    assert {name: n for name, n in read.items() if n > bounds[name]} == {}, read
