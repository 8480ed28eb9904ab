"""The leader's watchdog against real PostgreSQL and Redis: a run whose token went out and that
nobody claimed goes back in the outbox (which pushes it again), once per backoff, never while
executors are behind."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
import redis.asyncio as aioredis

from cronos.errors import NotLeader
from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.metrics import REGISTRY
from cronos.settings import Settings
from cronos.store.epoch import EpochStore
from cronos.store.ledger import Ledger
from cronos.store.runs import RunStore
from dispatcher.outbox import Outbox
from dispatcher.publisher import Publisher
from dispatcher.watchdog import Watchdog
from tests.integration.ledger_helpers import insert_job, insert_run


async def _queued(pool: asyncpg.Pool, job: int, late_s: float, pushed_epoch: int | None) -> int:
    due = datetime.now(UTC) - timedelta(seconds=late_s)
    token = await insert_run(pool, job, due, due_at=due)
    await pool.execute("UPDATE runs SET pushed_epoch = $2 WHERE id = $1", token.run_id, pushed_epoch)
    return token.run_id


async def _read(publisher: Publisher) -> list[RunToken]:
    """What an executor reading now would get (and acknowledge)."""
    deliveries = await publisher.stream.read("reader", 100, block_ms=None)
    await publisher.stream.ack([d.entry_id for d in deliveries])
    return [d.token for d in deliveries if d.token is not None]


@dataclass
class Leader:
    pool: asyncpg.Pool
    publisher: Publisher
    epoch: int

    def watchdog(self, overdue_after_ms: int, epoch: int | None = None) -> Watchdog:
        fence = self.epoch if epoch is None else epoch
        return Watchdog(Ledger(self.pool), RunStore(self.pool), self.publisher, lambda: fence, overdue_after_ms)

    async def pushed(self) -> list[int]:
        """The outbox's round (what the watchdog's wake starts), then what an executor reads."""
        await Outbox(Ledger(self.pool), self.publisher, lambda: self.epoch, 0).take(datetime.now(UTC))
        return [t.run_id for t in await _read(self.publisher)]

    async def pushed_epoch(self, run_id: int) -> int | None:
        return await self.pool.fetchval("SELECT pushed_epoch FROM runs WHERE id = $1", run_id)  # type: ignore[no-any-return]


@pytest.fixture
async def leader(settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis) -> Leader:
    publisher = Publisher(redis_client, Keys(settings.key_prefix))
    await publisher.prepare()
    return Leader(pg_pool, publisher, (await EpochStore(pg_pool).take("test-leader")).epoch)


async def test_a_pushed_run_nobody_claimed_is_pushed_again_with_backoff(leader: Leader) -> None:
    pg_pool, publisher, epoch = leader.pool, leader.publisher, leader.epoch
    store = RunStore(pg_pool)
    watchdog = leader.watchdog(3000)
    job = await insert_job(pg_pool)
    lost = await _queued(pg_pool, job, late_s=5, pushed_epoch=epoch - 1)  # its token is gone
    recent = await _queued(pg_pool, job, late_s=2, pushed_epoch=epoch)  # overdue, not yet past the bound

    assert await watchdog.once(now=0.0) == 1
    assert REGISTRY.get_sample_value("cronos_runs_overdue") == 2
    assert await leader.pushed_epoch(lost) is None  # back in the outbox
    assert await leader.pushed() == [lost]
    assert await leader.pushed_epoch(lost) == epoch
    assert await watchdog.once(now=1.0) == 0  # put back a moment ago: it waits
    assert await watchdog.once(now=3.5) == 1  # then again
    assert await leader.pushed() == [lost]
    await pg_pool.execute("UPDATE runs SET due_at = due_at - interval '2 s' WHERE id = $1", recent)  # time passes
    assert await watchdog.once(now=4.0) == 1  # the other one, now past the bound (the lost one waits 6 s)
    assert await leader.pushed() == [recent]

    # Executors behind (a token nobody has read yet): overdue runs are a backlog, not lost tokens.
    await publisher.stream.publish([RunToken(run_id=0, job_id=job, scheduled_for_ms=0)])
    assert await watchdog.once(now=100.0) == 0
    await _read(publisher)

    (claim,) = await store.claim([lost], "e1", 10)  # claimed at last: not overdue any more
    assert not isinstance(claim, str)
    assert await watchdog.once(now=200.0) == 1
    assert lost not in await leader.pushed()

    with pytest.raises(NotLeader):
        await leader.watchdog(3000, epoch=epoch - 1).once(now=300.0)  # deposed: writes nothing


async def test_off_it_only_exports_the_backlog(leader: Leader) -> None:
    await _queued(leader.pool, await insert_job(leader.pool), late_s=60, pushed_epoch=leader.epoch)
    assert await leader.watchdog(0).once(now=0.0) == 0
    assert REGISTRY.get_sample_value("cronos_runs_overdue") == 1
    assert await _read(leader.publisher) == []


async def test_a_lagging_queue_holds_back_only_its_own_runs(leader: Leader) -> None:
    """A queue nobody serves (its stream lags for good) does not stop the watchdog for the others;
    a run lost from the served queue is pushed again onto its own queue's stream."""
    pg_pool, publisher = leader.pool, leader.publisher
    served, unserved = await insert_job(pg_pool), await insert_job(pg_pool)
    await pg_pool.execute("UPDATE jobs SET queue = 'edge' WHERE id = $1", unserved)
    waiting = await _queued(pg_pool, unserved, late_s=5, pushed_epoch=leader.epoch)
    assert await Ledger(pg_pool).unmark_overdue(leader.epoch, 0, []) == [waiting]
    assert await leader.pushed() == []  # pushed onto its job's queue's stream, read when it is pushed
    assert (await publisher.stream.info("edge")).lag == 1
    lost = await _queued(pg_pool, served, late_s=5, pushed_epoch=leader.epoch)

    assert await leader.watchdog(3000).once(now=0.0) == 1
    assert await leader.pushed() == [lost]  # not the edge run: it waits for its pool
    assert (await publisher.stream.info("edge")).lag == 1
    assert await publisher.queues() == ["default", "edge"]
    assert await publisher.housekeeping(["edge"]) >= 1
    assert REGISTRY.get_sample_value("cronos_stream_lag", {"queue": "edge"}) == 1
    assert REGISTRY.get_sample_value("cronos_stream_lag", {"queue": "default"}) == 0
    # The job moves to a served queue: its run, stuck on the unserved stream, follows it.
    await pg_pool.execute("UPDATE jobs SET queue = 'default' WHERE id = $1", unserved)
    assert await leader.watchdog(3000).once(now=50.0) == 2  # (a new watchdog: `lost` again too)
    assert sorted(await leader.pushed()) == sorted([lost, waiting])
    # Both queues lagging: executors are behind everywhere, nothing is pushed.
    await publisher.stream.publish([RunToken(run_id=0, job_id=served, scheduled_for_ms=0)])
    await pg_pool.execute("UPDATE runs SET pushed_epoch = $2 WHERE id = $1", waiting, leader.epoch)
    assert await leader.watchdog(3000).once(now=100.0) == 0
