"""Waiting runs on a real dispatcher and executor: they cost PostgreSQL nothing while they wait,
and vanish with their job (issue 22, item 4).

One every-second `buffer_all` job whose task sleeps 40 s: each tick's run waits behind the
first. Issue 22 measured 7 -> 1,092 transactions/s in 40 s (every waiting run re-claimed its
token every <= 50 ms and held a prefetch slot) and the polling went on after the job was deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import asyncpg
import redis.asyncio as aioredis

from cronos.keys import Keys
from cronos.settings import Settings
from cronos.store.jobs import JobStore
from cronos.stream import RunStream
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.waiting import wait_for

# Transactions/s a waiting job may add to the idle cluster's. Measured here (2 cores shared): idle
# 13-17/s (heartbeats, watchdog, resync), the job with 3-7 runs waiting 10-13/s above it (a tick,
# its push, its claim and wait each second). The polling issue 22 found, this test run on the code
# before it went (d542157^): 182 and 334 xact/s at the same point, and it went on after the delete.
WAITING_XACT_BOUND = 50.0
WINDOW_S = 3.0  # PostgreSQL flushes a busy backend's counts every second: a few of them


@contextlib.asynccontextmanager
async def cluster(settings: Settings) -> AsyncIterator[tuple[Dispatcher, Executor]]:
    """A dispatcher and an executor in this process, as `cronos dev` runs them."""
    async with Dispatcher(settings) as dispatcher, Executor(settings) as executor:
        tasks = [asyncio.create_task(dispatcher.run()), asyncio.create_task(executor.run())]
        try:
            yield dispatcher, executor
        finally:
            dispatcher.stop()
            executor.stop()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=15)


async def add_sleeper(pool: asyncpg.Pool) -> int:
    """An every-second buffer_all job whose task sleeps 40 s, as the API writes it (its notify)."""
    async with pool.acquire() as conn, conn.transaction():
        job_id = await conn.fetchval(
            "INSERT INTO jobs (name, cron_expression, concurrency_policy, payload, timeout_s, misfire_grace_s,"
            " last_scheduled_for) VALUES ('sleeper', '* * * * * *', 'buffer_all', $1, 60, 600, now()) RETURNING id",
            {"action": "sleep", "seconds": 40},
        )
        await conn.execute("SELECT pg_notify('cronos_jobs', $1)", f'{{"op": "created", "job_id": {job_id}}}')
    return int(job_id)


async def xact_per_s(pool: asyncpg.Pool, seconds: float) -> float:
    """Committed transactions/s in this test's database over `seconds` (pg_stat_database)."""
    query = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
    before, began = await pool.fetchval(query), time.monotonic()
    await asyncio.sleep(seconds)  # a measurement window, not a wait for a condition
    return float(await pool.fetchval(query) - before) / (time.monotonic() - began)


async def test_waiting_runs_cost_nothing_and_vanish_with_their_job(
    settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis
) -> None:
    stream = RunStream(redis_client, Keys(settings.key_prefix))
    async with cluster(settings) as (dispatcher, executor):
        await wait_for(lambda: _true(dispatcher.election is not None and dispatcher.election.leading), what="a leader")
        idle = await xact_per_s(pg_pool, WINDOW_S)

        job = await add_sleeper(pg_pool)
        await wait_for(lambda: _states_at_least(pg_pool, job, "waiting", 3), timeout=10, what="runs waiting")
        waiting = await xact_per_s(pg_pool, WINDOW_S)
        assert await _count(pg_pool, job, "running") == 1
        assert waiting - idle < WAITING_XACT_BOUND, f"{waiting:.0f} xact/s while runs wait (idle {idle:.0f})"

        await JobStore(pg_pool).delete(job)
        assert await _count(pg_pool, job) == 0  # its runs went with it, the running one too
        # The running run's work is cancelled at the next heartbeat (its lease is gone), every
        # token acknowledged, every prefetch slot free: nothing left to claim again.
        await wait_for(lambda: _true(not executor.deps.in_flight), timeout=5, what="the running run cancelled")  # type: ignore[union-attr]
        await wait_for(lambda: _free(executor, settings), timeout=5, what="every prefetch slot free")
        await wait_for(lambda: _no_pending(stream), timeout=5, what="every token acknowledged")
        outcomes = dict(executor.counts)
        after = await xact_per_s(pg_pool, WINDOW_S)
        assert executor.counts == outcomes, "no token of the deleted job is claimed again"
        # The leader's idle loops (outbox, health, notifier, timed pauses, group sweep: ~30 xact/s with
        # the pool's reset statements) jitter by ~10 xact/s between two 3 s windows; the polling this
        # guards against cost 182-334 xact/s and went on after the delete.
        assert after - idle < WAITING_XACT_BOUND / 2, f"{after:.0f} xact/s after the delete (idle {idle:.0f})"
        assert await _count(pg_pool, job) == 0
    print(f"xact/s: idle {idle:.1f}, runs waiting {waiting:.1f}, after the delete {after:.1f}")


async def _true(value: bool) -> bool:
    return value


async def _count(pool: asyncpg.Pool, job_id: int, state: str | None = None) -> int:
    query = "SELECT count(*) FROM runs WHERE job_id = $1 AND ($2::text IS NULL OR state::text = $2)"
    return int(await pool.fetchval(query, job_id, state))


async def _states_at_least(pool: asyncpg.Pool, job_id: int, state: str, n: int) -> bool:
    return await _count(pool, job_id, state) >= n


async def _free(executor: Executor, settings: Settings) -> bool:
    return executor.consumer is not None and executor.consumer.free == settings.executor_prefetch


async def _no_pending(stream: RunStream) -> bool:
    return (await stream.info()).pending == 0
