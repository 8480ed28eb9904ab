"""A per-host run's token with real executors (executor.routing): the host it names runs it, any
other executor hands it over to that host, and with that host gone it is acknowledged and left
queued without reporting the job unserved (cronos.every_host)."""

from __future__ import annotations

import msgspec
import redis.asyncio as aioredis

from cronos import presence
from cronos.keys import Keys
from cronos.settings import Settings
from tests.integration.ledger_helpers import Harness, insert_run, tick
from tests.integration.test_executor_routing import Factory, executor, harness  # noqa: F401  (the fixtures)


async def _token_for(harness: Harness, host: str) -> int:  # noqa: F811
    job = await harness.job(payload={"action": "noop"})
    await harness.pool.execute("UPDATE jobs SET concurrency_policy = 'allow' WHERE id = $1", job)
    run = await insert_run(harness.pool, job, tick(0))
    await harness.pool.execute("UPDATE runs SET host = $2 WHERE job_id = $1", job, host)
    await harness.stream.publish([msgspec.structs.replace(run, action="noop", host=host)])
    return job


async def test_the_named_host_runs_it_and_another_hands_it_over(
    harness: Harness,  # noqa: F811
    executor: Factory,  # noqa: F811
    redis_client: aioredis.Redis,
    settings: Settings,
) -> None:
    mine = f"{settings.node_id}-a"
    job = await _token_for(harness, mine)
    async with executor("a") as ex:
        assert await ex.run_once() == {"completed": 1}
    (run,) = await harness.runs(job)
    assert (run.state, run.node_id) == ("completed", mine)

    # b is not the host and the host (a, never read again) is live: handed over, never claimed by b.
    await presence.beat(redis_client, Keys(settings.key_prefix), "executor", mine, 30, queues="default")
    other = await _token_for(harness, mine)
    async with executor("b") as ex:
        counts = await ex.run_once()
    assert counts.get("handed_over", 0) >= 1 and "completed" not in counts, counts
    assert [r.state for r in await harness.runs(other)] == ["queued"]


async def test_a_token_whose_host_is_gone_is_left_queued_and_not_reported_unserved(
    harness: Harness,  # noqa: F811
    executor: Factory,  # noqa: F811
) -> None:
    job = await _token_for(harness, "gone-host")
    async with executor("b") as ex:
        assert await ex.run_once() == {"unserved": 1}
        assert ex.deps is not None
        assert ex.deps.routing.reported(0) == []  # the job is served: only that host is not there
    assert [r.state for r in await harness.runs(job)] == ["queued"]
    assert (await harness.stream.info()).pending == 0
