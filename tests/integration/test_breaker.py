"""The breaker's fenced trip over a real ledger (cronos.store.breaker): the health evaluator counts
the failures, the breaker pauses, once, by the `dispatcher`, and a job resumed by hand counts afresh."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

from cronos.errors import NotLeader
from cronos.store.breaker import trip_due
from cronos.store.epoch import EpochStore
from cronos.store.jobs import JobStore
from tests.integration.test_health import create, evaluator, run


@pytest.fixture
async def epoch(pg_pool: asyncpg.Pool) -> int:
    await pg_pool.execute("UPDATE health_scan SET scanned_to = now() - interval '1 hour'")
    return (await EpochStore(pg_pool).take("breaker-test")).epoch


async def fail(pool: asyncpg.Pool, epoch: int, job_id: int, times: int) -> None:
    for _ in range(times):
        await run(pool, job_id, "failed", error="boom")
    await evaluator(pool, epoch).once()


async def trip(pool: asyncpg.Pool, epoch: int, *, after: int = 0, limit: int = 100) -> list[int]:
    paused, _more = await trip_due(pool, epoch, 3, datetime.now(UTC), after=after, limit=limit)
    return [job.id for job in paused]


async def test_three_failures_in_a_row_pause_the_job_once_with_its_reason(pg_pool: asyncpg.Pool, epoch: int) -> None:
    job = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, job, 2)
    assert await trip(pg_pool, epoch) == []  # 2 of 3
    await fail(pg_pool, epoch, job, 1)
    with pytest.raises(NotLeader):
        await trip(pg_pool, epoch - 1)  # a deposed leader writes nothing
    assert await trip(pg_pool, epoch) == [job]
    assert await trip(pg_pool, epoch) == []  # paused already
    row = await pg_pool.fetchrow("SELECT status, pause_note, revision FROM jobs WHERE id = $1", job)
    assert row["status"] == "paused" and "after 3 failed runs in a row" in row["pause_note"]
    revision = await pg_pool.fetchrow("SELECT * FROM job_revisions WHERE job_id = $1 ORDER BY number DESC", job)
    assert (revision["kind"], revision["actor"], revision["number"]) == ("paused", "dispatcher", row["revision"])
    audit = await pg_pool.fetchrow("SELECT * FROM audit_log WHERE job_id = $1 ORDER BY id DESC", job)
    assert (audit["action"], audit["actor"]) == ("paused", "dispatcher")
    kinds = await pg_pool.fetch("SELECT kind, detail FROM job_events WHERE job_id = $1 ORDER BY id", job)
    assert kinds[-1]["kind"] == "paused_by_breaker" and kinds[-1]["detail"]["consecutive_failures"] == 3


async def test_a_job_resumed_by_hand_pauses_again_only_after_k_more_failures(pg_pool: asyncpg.Pool, epoch: int) -> None:
    job = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, job, 3)
    assert await trip(pg_pool, epoch) == [job]
    await JobStore(pg_pool).set_status(job, "active")
    await fail(pg_pool, epoch, job, 2)  # 5 in a row, 2 since the trip
    assert await trip(pg_pool, epoch) == []
    await fail(pg_pool, epoch, job, 1)
    assert await trip(pg_pool, epoch) == [job]


async def test_jobs_counted_but_not_tripped_do_not_hold_back_the_next_page(pg_pool: asyncpg.Pool, epoch: int) -> None:
    resumed = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, resumed, 3)
    assert await trip(pg_pool, epoch) == [resumed]
    await JobStore(pg_pool).set_status(resumed, "active")
    other = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, other, 3)
    paused, more = await trip_due(pg_pool, epoch, 3, datetime.now(UTC), limit=1)
    assert paused == [] and more == resumed  # a full page: read on
    assert await trip(pg_pool, epoch, after=resumed, limit=1) == [other]
