"""The reconciliation auditor covers windowed, max_runs and one-off jobs (also once they ended),
leaves out a window an edit cut through, and writes each missed tick as one `missed` event."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import redis.asyncio as aioredis

from cronos.keys import Keys
from cronos.settings import Settings
from cronos.store.epoch import EpochStore
from cronos.store.ledger import Ledger
from dispatcher.auditor import Auditor
from dispatcher.publisher import Publisher
from dispatcher.ticker import Ticker

_names = itertools.count()


async def add_job(pool: asyncpg.Pool, cursor: datetime, **fields: Any) -> int:
    """A job created an hour before `cursor` (the leader has written every tick up to it)."""
    values = {"cron_expression": "*/10 * * * * *", "misfire_policy": "run_all", "misfire_grace_s": 600.0} | fields
    columns = ", ".join(values)
    marks = ", ".join(f"${i}" for i in range(4, 4 + len(values)))
    return int(
        await pool.fetchval(
            f"INSERT INTO jobs (name, created_at, last_scheduled_for, {columns})"
            f" VALUES ($1, $2, $3, {marks}) RETURNING id",
            f"audited-{next(_names)}",
            cursor - timedelta(hours=1),
            cursor,
            *values.values(),
        )
    )


async def test_windowed_max_runs_and_one_off_jobs_are_audited_and_missed_ticks_are_events_once(
    settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis
) -> None:
    # Real time: the leader's end of a job is stamped with PostgreSQL's clock (updated_at).
    t0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    windowed = await add_job(pg_pool, t0, start_at=t0 + timedelta(seconds=20), end_at=t0 + timedelta(seconds=40))
    limited = await add_job(pg_pool, t0, max_runs=2)
    one_off = await add_job(pg_pool, t0, cron_expression=None, run_at=t0 + timedelta(seconds=35))
    edited = await add_job(pg_pool, t0)
    epoch = (await EpochStore(pg_pool).take("audit-test")).epoch
    publisher = Publisher(redis_client, Keys(settings.key_prefix))
    await publisher.prepare()
    ticker = Ticker(Ledger(pg_pool), publisher, lambda: epoch, resync_interval_s=3600, lookahead_s=0)
    await ticker.run_once(t0 + timedelta(seconds=60))
    ended = await pg_pool.fetch("SELECT id, status FROM jobs WHERE id = ANY($1::bigint[]) ORDER BY id",
                                [windowed, limited, one_off])  # fmt: skip
    assert [r["status"] for r in ended] == ["completed"] * 3, "the leader ended them as it wrote their last tick"

    gone = {(windowed, t0 + timedelta(seconds=30)), (limited, t0 + timedelta(seconds=20)),
            (one_off, t0 + timedelta(seconds=35)), (edited, t0 + timedelta(seconds=50))}  # fmt: skip
    for job_id, tick in gone:
        await pg_pool.execute("DELETE FROM runs WHERE job_id = $1 AND scheduled_for = $2", job_id, tick)
    # An edit within the window: its ticks may have moved, so the window is not judged for that job.
    await pg_pool.execute(
        "INSERT INTO job_revisions (job_id, number, kind, actor, status, fields, changes, at)"
        " VALUES ($1, 2, 'updated', 'test', 'active', ARRAY['cron_expression'], '{}'::jsonb, $2)",
        edited, t0 + timedelta(seconds=45),
    )  # fmt: skip

    result = await Auditor(pg_pool, interval_s=60, settle_s=0, check=lambda: epoch).once(t0 + timedelta(seconds=60))
    expected_missing = sorted(gone - {(edited, t0 + timedelta(seconds=50))})
    assert sorted(result.unaccounted) == expected_missing
    # Windowed: 20, 30, 40; max_runs: 10, 20; one-off: 35; the plain job: 10..60 — but the edited one.
    assert result.expected == 3 + 2 + 1
    again = await Auditor(pg_pool, interval_s=60, settle_s=0, check=lambda: epoch).once(t0 + timedelta(seconds=60))
    assert sorted(again.unaccounted) == expected_missing
    rows = await pg_pool.fetch("SELECT job_id, occurred_at FROM job_events WHERE kind = 'missed' ORDER BY job_id")
    assert sorted((r["job_id"], r["occurred_at"]) for r in rows) == expected_missing, "each missed tick once"
    verdicts = await pg_pool.fetch("SELECT job_id, verdict FROM job_health ORDER BY job_id")
    assert {(r["job_id"], r["verdict"]) for r in verdicts} == {(j, "missing") for j, _t in expected_missing}


async def test_a_pass_reads_jobs_by_schedule_and_names_them_only_for_the_rules(pg_pool: asyncpg.Pool) -> None:
    """Jobs alike come as one schedule (AUDIT_SCHEDULES); a defer blackout that selects one job by name
    still holds that job's ticks (not missing), while the same schedule's other job misses its own."""
    t0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    held, plain = await add_job(pg_pool, t0), await add_job(pg_pool, t0)
    others = [await add_job(pg_pool, t0) for _ in range(3)]
    name = await pg_pool.fetchval("SELECT name FROM jobs WHERE id = $1", held)
    await pg_pool.execute(
        "INSERT INTO blackouts (name, action, starts_at, ends_at, selector) VALUES ('freeze', 'defer', $1, $2, $3)",
        t0, t0 + timedelta(hours=1), {"jobs": [name]},
    )  # fmt: skip
    ticks = [t0 + timedelta(seconds=s) for s in range(10, 70, 10)]
    for job_id in others:  # their runs are all there
        await pg_pool.execute(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, finished_at)"
            " SELECT $1, t, 1, 'schedule', 'completed', t, t FROM unnest($2::timestamptz[]) t",
            job_id, ticks,
        )  # fmt: skip

    result = await Auditor(pg_pool, interval_s=60, settle_s=0).once(t0 + timedelta(seconds=60))
    assert result.jobs == 5 and result.expected == 5 * 6
    assert sorted(result.unaccounted) == [(plain, t) for t in ticks], "the held job's ticks are deferred, not missing"
