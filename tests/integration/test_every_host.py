"""Runs on every host against real PostgreSQL and Redis: the leader writes one run per chosen
executor per tick, each naming its host, beside the tick's own row; the set follows presence from
the next tick on; a tick written twice gets no second run on any host (G1 per host)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis

from cronos import presence
from cronos.every_host import SKIP_NO_HOST, SKIP_PER_HOST
from cronos.keys import Keys
from cronos.lifecycle import expiry
from cronos.store.claims import ClaimedRun
from cronos.store.epoch import EpochStore
from cronos.store.ledger import Ledger
from cronos.store.runs import Outcome, RunStore
from cronos.stream import RunStream
from dispatcher.ticker import Ticker
from tests.integration.test_dispatcher_ticks import Stack, stack  # noqa: F401 (the fixture)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Fleet:
    def __init__(self, pool: asyncpg.Pool, redis: aioredis.Redis, keys: Keys, ticker: Ticker, ledger: Ledger) -> None:
        self.pool, self.redis, self.keys, self.ticker, self.ledger = pool, redis, keys, ticker, ledger

    async def join(self, node: str, queues: str = "default", **info: Any) -> None:
        await presence.beat(self.redis, self.keys, "executor", node, 60, queues=queues, **info)

    async def leave(self, node: str) -> None:
        await presence.leave(self.redis, self.keys, "executor", node)

    async def job(self, hosts: dict[str, Any] | None, expression: str = "*/2 * * * * *") -> int:
        return int(
            await self.pool.fetchval(
                "INSERT INTO jobs (name, cron_expression, misfire_policy, status, last_scheduled_for, hosts)"
                " VALUES ($1, $2, 'run_all', 'active', $3, $4) RETURNING id",
                f"per-host-{expression}-{json.dumps(hosts)}",
                expression,
                T0,
                hosts,
            )
        )

    async def ticks(self, job: int, second: int) -> list[tuple[str | None, str, str | None]]:
        """(host, state, skip reason) of the job's rows of the tick at T0 + `second`."""
        rows = await self.pool.fetch(
            "SELECT nullif(host, '') AS host, state, skip_reason FROM runs WHERE job_id = $1 AND scheduled_for = $2"
            " ORDER BY host NULLS FIRST",
            job,
            T0 + timedelta(seconds=second),
        )
        return [(r["host"], r["state"], r["skip_reason"]) for r in rows]


@pytest.fixture
async def fleet(stack: Stack) -> Fleet:  # noqa: F811 (the imported fixture)
    return Fleet(stack.pool, stack.redis, stack.keys, stack.new_ticker(), stack.ledger)


async def test_a_run_per_executor_per_tick_each_naming_its_host_and_the_set_follows_presence(fleet: Fleet) -> None:
    await fleet.join("a")
    await fleet.join("b")
    await fleet.join("c", queues="other")  # not of the job's queue: never one of its hosts
    job = await fleet.job({})
    ordinary = await fleet.job(None)

    first = await fleet.ticker.run_once(T0 + timedelta(seconds=2.3))
    assert await fleet.ticks(job, 2) == [
        (None, "skipped", SKIP_PER_HOST),
        ("a", "queued", None),
        ("b", "queued", None),
    ]
    assert await fleet.ticks(ordinary, 2) == [(None, "queued", None)]  # unchanged: one run, no host
    assert (first.queued, first.skipped, first.pushed) == (3, 0, 3)
    tokens = [d.token for d in await RunStream(fleet.redis, fleet.keys).read("reader", 100, block_ms=None)]
    assert sorted((t.job_id, t.host) for t in tokens if t is not None) == [(job, "a"), (job, "b"), (ordinary, None)]

    await fleet.leave("b")  # drops out from the next tick on
    await fleet.join("d")  # joins from the next tick on
    await fleet.ticker.run_once(T0 + timedelta(seconds=4.3))
    assert await fleet.ticks(job, 4) == [
        (None, "skipped", SKIP_PER_HOST),
        ("a", "queued", None),
        ("d", "queued", None),
    ]
    assert [h for h, _, _ in await fleet.ticks(job, 2)] == [None, "a", "b"]  # a written tick keeps its runs


async def test_count_label_and_no_live_host(fleet: Fleet) -> None:
    for node, rack in (("a", "x"), ("b", "y"), ("c", "x")):
        await fleet.join(node, labels=f"rack={rack}")
    one = await fleet.job({"count": 1})
    rack_x = await fleet.job({"label": "rack=x"})
    nowhere = await fleet.job({"label": "rack=z"})
    await fleet.ticker.run_once(T0 + timedelta(seconds=2.3))
    assert len([h for h, state, _ in await fleet.ticks(one, 2) if state == "queued"]) == 1
    assert [h for h, _, _ in await fleet.ticks(rack_x, 2)] == [None, "a", "c"]
    assert await fleet.ticks(nowhere, 2) == [(None, "skipped", SKIP_NO_HOST)]  # recorded, not lost (G2)


async def test_a_tick_written_twice_gets_one_run_per_host(fleet: Fleet, pg_pool: asyncpg.Pool) -> None:
    """G1 per host: a leader writing a tick again (a failover, a retried batch) adds no run."""
    job = await fleet.job({})
    epoch = (await EpochStore(pg_pool).take("second-leader")).epoch
    tick = T0 + timedelta(seconds=2)

    async def write() -> list[str | None]:
        result = await fleet.ledger.write_ticks(
            epoch, [job], [tick], [tick], [SKIP_PER_HOST], [1], expires_at=[expiry(tick, 60)], fan_out={job: ["a", "b"]}
        )
        return sorted(r.host or "" for r in result.queued)

    assert await write() == ["a", "b"]
    await pg_pool.execute("UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", job, T0)  # as if never moved
    assert await write() == []
    await pg_pool.execute("UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", job, T0)
    added = await fleet.ledger.write_ticks(
        epoch, [job], [tick], [tick], [SKIP_PER_HOST], [1], expires_at=[expiry(tick, 60)], fan_out={job: ["c"]}
    )
    assert added.queued == []  # the tick's own row exists: no fan-out for it again, whatever the hosts now
    assert [h for h, _, _ in await fleet.ticks(job, 2)] == [None, "a", "b"]
    with pytest.raises(asyncpg.UniqueViolationError, match=r"\(job_id, scheduled_for, attempt, host\)"):
        await pg_pool.execute(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, host)"
            " VALUES ($1, $2, 1, 'schedule', 'queued', $2, 'a')",
            job,
            tick,
        )


async def test_a_failed_per_host_run_is_retried_on_its_own_host(fleet: Fleet, pg_pool: asyncpg.Pool) -> None:
    """Retries per host: each host's failed run gets its next attempt on that host, one per (tick, host)."""
    await fleet.join("a")
    await fleet.join("b")
    job = await fleet.job({})
    await pg_pool.execute("UPDATE jobs SET concurrency_policy = 'allow', max_retries = 1 WHERE id = $1", job)
    await fleet.ticker.run_once(T0 + timedelta(seconds=2.3))
    runs = {r["host"]: r["id"] for r in await pg_pool.fetch(
        "SELECT id, host FROM runs WHERE job_id = $1 AND host <> '' ORDER BY host", job)}  # fmt: skip
    store = RunStore(pg_pool)
    for host, run_id in runs.items():
        (claimed,) = await store.claim([run_id], host, 30.0)
        assert isinstance(claimed, ClaimedRun), claimed
        await store.finish([Outcome(run_id=run_id, node_id=host, state="failed", error="boom", retry_delay_s=0)])
    retries = await pg_pool.fetch(
        "SELECT host, attempt, trigger, state FROM runs WHERE job_id = $1 AND attempt = 2 ORDER BY host", job
    )
    assert [(r["host"], r["attempt"], r["trigger"], r["state"]) for r in retries] == [
        ("a", 2, "retry", "queued"),
        ("b", 2, "retry", "queued"),
    ]
