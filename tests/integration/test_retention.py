"""Bounded history against real PostgreSQL: the leader's retention pass creates the day
partitions of runs ahead, drops whole days past retention, never one holding a queued or
running run, and is fenced by the leader's epoch."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cronos.errors import NotLeader
from cronos.settings import Settings
from cronos.store.epoch import EpochStore
from cronos.store.partitions import Change, PartitionStore
from dispatcher import retention
from dispatcher.service import Dispatcher
from tests.integration.ledger_helpers import insert_job
from tests.waiting import wait_for

DAY = timedelta(days=1)
JAN1 = datetime(2030, 1, 1, tzinfo=UTC)


async def add_run(pool: asyncpg.Pool, job_id: int, scheduled_for: datetime, state: str, attempt: int = 1) -> int:
    return int(
        await pool.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, node_id, started_at)"
            " VALUES ($1, $2, $3, 'schedule', $4, $2, CASE WHEN $4 = 'running' THEN 'n1' END,"
            " CASE WHEN $4 = 'running' THEN now() END) RETURNING id",
            job_id,
            scheduled_for,
            attempt,
            state,
        )
    )


async def partition_of(pool: asyncpg.Pool, run_id: int) -> str:
    return str(await pool.fetchval("SELECT tableoid::regclass::text FROM runs WHERE id = $1", run_id))


async def names(store: PartitionStore) -> set[str]:
    return {p.name for p in await store.list()}


@pytest.fixture
async def epoch(pg_pool: asyncpg.Pool) -> int:
    return (await EpochStore(pg_pool).take("test")).epoch


async def test_days_ahead_are_created_and_take_their_runs_from_the_default_partition(
    pg_pool: asyncpg.Pool, epoch: int
) -> None:
    store = PartitionStore(pg_pool)
    job = await insert_job(pg_pool)
    waiting = await add_run(pg_pool, job, JAN1 + DAY + timedelta(hours=10), "running")
    assert await partition_of(pg_pool, waiting) == "runs_default"  # no day for it yet

    todo = await retention.once(store, epoch, JAN1 + timedelta(hours=12), 0)

    assert [d.name for d in todo.create] == ["runs_20300101", "runs_20300102", "runs_20300103", "runs_20300104"]
    assert {d.name for d in todo.create} <= await names(store)
    assert await partition_of(pg_pool, waiting) == "runs_20300102"
    # Moved while running: its job's G3 row is there still, so a second exclusive run cannot start.
    assert await pg_pool.fetchval("SELECT run_id FROM runs_running_exclusive WHERE job_id = $1", job) == waiting
    second = await add_run(pg_pool, job, JAN1 + timedelta(hours=13), "queued")
    with pytest.raises(asyncpg.UniqueViolationError):
        await pg_pool.execute("UPDATE runs SET state = 'running' WHERE id = $1", second)
    # A second pass has nothing left to do.
    assert (await retention.once(store, epoch, JAN1 + timedelta(hours=12), 0)).create == []


async def test_only_whole_days_past_retention_go_and_never_a_queued_or_running_run(
    pg_pool: asyncpg.Pool, epoch: int
) -> None:
    store = PartitionStore(pg_pool)
    await retention.once(store, epoch, JAN1 - DAY, 0)  # days 2029-12-31 .. 2030-01-03
    job, other = await insert_job(pg_pool), await insert_job(pg_pool)
    running = await add_run(pg_pool, job, JAN1 - DAY + timedelta(hours=1), "running")  # 12-31
    finished = [
        await add_run(pg_pool, other, JAN1 + timedelta(hours=h), s) for h, s in ((1, "completed"), (2, "failed"))
    ]
    queued = await add_run(pg_pool, other, JAN1 + DAY + timedelta(hours=1), "queued")  # 01-02
    recent = await add_run(pg_pool, other, JAN1 + 2 * DAY + timedelta(hours=1), "completed")  # 01-03
    total = await pg_pool.fetchval("SELECT count(*) FROM runs")

    # Retention one day, at 01-04 06:00: every day ending by 01-03 06:00 is past it.
    now = JAN1 + 3 * DAY + timedelta(hours=6)
    todo = await retention.once(store, epoch, now, 86_400)

    assert {"runs_20291231", "runs_20300101", "runs_20300102"} <= set(todo.drop)
    left = await names(store)
    assert "runs_20300101" not in left  # finished runs only: dropped with its day
    assert {"runs_20291231", "runs_20300102", "runs_20300103", "runs_20300104", "runs_default"} <= left
    assert await pg_pool.fetchval("SELECT count(*) FROM runs") == total - len(finished)
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE id = ANY($1)", [running, queued, recent]) == 3

    # A finished run in the default partition past retention goes too (a queued one stays).
    stray = [
        await add_run(pg_pool, other, datetime(2029, 6, 1, tzinfo=UTC), s, a) for a, s in ((1, "failed"), (2, "queued"))
    ]
    assert await partition_of(pg_pool, stray[0]) == "runs_default"

    await pg_pool.execute("UPDATE runs SET state = 'completed' WHERE id = ANY($1)", [running, queued])
    await retention.once(store, epoch, now, 86_400)
    left = await names(store)
    assert "runs_20291231" not in left and "runs_20300102" not in left
    assert [r["id"] for r in await pg_pool.fetch("SELECT id FROM runs ORDER BY id")] == [recent, stray[1]]


async def test_a_partition_in_use_is_kept_by_the_store_too(pg_pool: asyncpg.Pool, epoch: int) -> None:
    store = PartitionStore(pg_pool)
    await retention.once(store, epoch, JAN1, 0)
    job = await insert_job(pg_pool)
    await add_run(pg_pool, job, JAN1 + timedelta(hours=3), "queued")
    assert await store.drop(epoch, "runs_20300101") is Change.IN_USE
    assert await store.drop(epoch, "runs_20300102") is Change.DONE


async def test_a_drop_that_cannot_have_its_lock_gives_up_at_once(pg_pool: asyncpg.Pool, epoch: int) -> None:
    store = PartitionStore(pg_pool)
    await retention.once(store, epoch, JAN1, 0)
    async with pg_pool.acquire() as conn, conn.transaction():
        await conn.execute("LOCK TABLE runs_20300102 IN ACCESS SHARE MODE")  # a long reader
        assert await asyncio.wait_for(store.drop(epoch, "runs_20300102"), 5) is Change.BUSY
    assert await store.drop(epoch, "runs_20300102") is Change.DONE


async def test_a_deposed_leader_changes_no_partition(pg_pool: asyncpg.Pool, epoch: int) -> None:
    store = PartitionStore(pg_pool)
    await EpochStore(pg_pool).take("another")
    before = await names(store)
    with pytest.raises(NotLeader):
        await retention.once(store, epoch, JAN1, 0)
    with pytest.raises(NotLeader):
        await store.drop(epoch, next(n for n in before if n.startswith("runs_2")))
    assert await names(store) == before


async def test_the_leader_creates_the_days_ahead_when_its_term_starts(
    pg_pool: asyncpg.Pool, settings: Settings
) -> None:
    store = PartitionStore(pg_pool)
    ahead = retention.day_name(datetime.now(UTC) + retention.AHEAD_DAYS * DAY)
    epoch = (await EpochStore(pg_pool).take("test")).epoch
    assert await store.drop(epoch, ahead) is Change.DONE
    async with Dispatcher(settings) as role:
        task = asyncio.create_task(role.run())
        try:

            async def created() -> bool:
                return ahead in await names(store)

            await wait_for(created, timeout=20, what=f"partition {ahead}")
        finally:
            role.stop()
            await asyncio.wait_for(task, 10)


async def test_a_change_that_fails_leaves_the_rest_of_the_pass_to_run(pg_pool: asyncpg.Pool, epoch: int) -> None:
    store = PartitionStore(pg_pool)
    await retention.once(store, epoch, JAN1, 0)
    await pg_pool.execute('CREATE TABLE "runs_20300106" (note text)')  # an operator's table in the way of a day
    await retention.once(store, epoch, JAN1 + 2 * DAY, 86_400)
    left = await names(store)
    assert "runs_20300105" in left and "runs_20300106" not in left  # the next day was still created
    assert "runs_20300101" not in left  # and the day past retention dropped
