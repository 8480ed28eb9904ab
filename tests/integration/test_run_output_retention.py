"""Run output and usage go with their runs: the leader's retention pass creates and drops the
partitions of run_output and run_usage with runs' (cronos/store/partitions.py), and purges the
default partition's alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cronos.run_output import Line, Pending
from cronos.store import run_output
from cronos.store.epoch import EpochStore
from cronos.store.partitions import PartitionStore
from cronos.store.queries import usage as usage_q
from dispatcher import retention
from tests.integration.ledger_helpers import insert_job
from tests.integration.test_retention import add_run

DAY = timedelta(days=1)
JAN1 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
async def epoch(pg_pool: asyncpg.Pool) -> int:
    return (await EpochStore(pg_pool).take("test")).epoch


async def output_of(pool: asyncpg.Pool, run_id: int, tick: datetime, text: str) -> None:
    await run_output.write(pool, [run_output.Written(run_id, tick, Pending([Line(0, 0.0, "stdout", text)], None))])
    await pool.execute(usage_q.USAGE_WRITE, [run_id], [tick], [1.0], [0.5], [0.4], [0.1], [1 << 20])  # and its usage


async def where(pool: asyncpg.Pool, run_id: int) -> str | None:
    """The partition of run_output holding the run's output, checked to be the day of run_usage
    holding its usage."""
    found = await pool.fetchval("SELECT tableoid::regclass::text FROM run_output WHERE run_id = $1", run_id)
    used = await pool.fetchval("SELECT tableoid::regclass::text FROM run_usage WHERE run_id = $1", run_id)
    assert (found is None) == (used is None), (found, used)
    if used is not None:
        assert str(used) == "run_usage" + str(found).removeprefix("run_output"), (found, used)
    return None if found is None else str(found)


async def test_output_is_dropped_with_its_runs_day_and_kept_with_the_days_still_kept(
    pg_pool: asyncpg.Pool, epoch: int
) -> None:
    store = PartitionStore(pg_pool)
    job = await insert_job(pg_pool)
    old_tick, new_tick = JAN1 + timedelta(hours=1), JAN1 + 2 * DAY + timedelta(hours=1)
    old, new = await add_run(pg_pool, job, old_tick, "completed"), await add_run(pg_pool, job, new_tick, "failed")
    await output_of(pg_pool, old, old_tick, "old line")
    await output_of(pg_pool, new, new_tick, "new line")
    assert await where(pg_pool, old) == "run_output_default"  # no day for it yet

    await retention.once(store, epoch, JAN1, 0)  # the days are created: they take their output along
    assert (await where(pg_pool, old), await where(pg_pool, new)) == ("run_output_20300101", "run_output_20300103")

    await retention.once(store, epoch, JAN1 + 2 * DAY + timedelta(hours=12), DAY.total_seconds())
    assert "runs_20300101" not in {p.name for p in await store.list()}
    assert await where(pg_pool, old) is None  # gone with its runs
    assert (await run_output.page(pg_pool, new, 0, 10)).lines[0].line == "new line"


async def test_the_default_partitions_output_goes_with_its_purged_runs(pg_pool: asyncpg.Pool, epoch: int) -> None:
    store = PartitionStore(pg_pool)
    job = await insert_job(pg_pool)
    far = datetime(2031, 6, 1, tzinfo=UTC)  # a day no partition holds: the default partition's
    done, going = await add_run(pg_pool, job, far, "completed"), await add_run(pg_pool, job, far, "running", 2)
    await output_of(pg_pool, done, far, "done")
    await output_of(pg_pool, going, far, "going")

    await store.purge_default(epoch, far + timedelta(hours=1))

    assert await where(pg_pool, done) is None
    assert await where(pg_pool, going) == "run_output_default"  # its run is still running: kept with it
