"""An executor without a token's task action, against real PostgreSQL and Redis: it hands the token
over while another live executor of the queue announces the action (a bounded number of times,
waiting longer each time, never a hot loop), and otherwise acknowledges it, reports the action
unserved and leaves the run queued (executor.routing)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from cronos import metrics, presence
from cronos.keys import Keys
from cronos.settings import Settings
from executor.routing import MAX_HOPS
from executor.service import Executor
from tests.integration.ledger_helpers import Harness, insert_run, tick

Factory = Callable[..., AbstractAsyncContextManager[Executor]]


@pytest.fixture
async def harness(pg_pool: Any, redis_client: aioredis.Redis, settings: Settings) -> Harness:
    from cronos.stream import RunStream

    stream = RunStream(redis_client, Keys(settings.key_prefix))
    await stream.ensure_group()
    return Harness(pg_pool, stream)


@pytest.fixture
def executor(settings: Settings) -> Factory:
    @asynccontextmanager
    async def start(node: str = "a") -> AsyncIterator[Executor]:
        async with Executor(msgspec.structs.replace(settings, node_id=f"{settings.node_id}-{node}")) as ex:
            yield ex

    return start


async def _queued_token(harness: Harness, action: str) -> int:
    """A job whose queued run's token carries `action`, as the leader pushes it; the job's id."""
    job = await harness.job(payload={"action": action})
    token = msgspec.structs.replace(await insert_run(harness.pool, job, tick(0)), action=action)
    await harness.stream.publish([token])
    return job


def _unserved_count(queue: str = "default") -> float:
    return float(metrics.TOKENS_UNSERVED.labels(queue=queue)._value.get())


async def test_a_token_no_live_executor_serves_is_acknowledged_reported_and_its_run_stays_queued(
    harness: Harness, executor: Factory
) -> None:
    job = await _queued_token(harness, "route.nobody")
    before = _unserved_count()
    async with executor() as ex:
        counts = await ex.run_once()
        assert ex.deps is not None
        assert ex.deps.routing.reported(time.time()) == [["default", "route.nobody"]]
    assert counts == {"unserved": 1}
    assert [r.state for r in await harness.runs(job)] == ["queued"]  # not failed: the watchdog pushes it again
    assert (await harness.stream.info()).pending == 0  # acknowledged, not left to idle out
    assert _unserved_count() == before + 1


async def test_a_token_another_executor_serves_is_handed_over_a_bounded_number_of_times(
    harness: Harness, executor: Factory, redis_client: aioredis.Redis, settings: Settings
) -> None:
    keys = Keys(settings.key_prefix)
    # A live executor of the queue that announces the action but never reads (busy): the token keeps
    # coming back here, each time a little later, until this node leaves it to the watchdog.
    await presence.beat(redis_client, keys, "executor", "busy-b", 30, queues="default", actions=["route.elsewhere"])
    job = await _queued_token(harness, "route.elsewhere")
    started = time.monotonic()
    async with executor() as ex:
        counts = await ex.run_once()
    took = time.monotonic() - started
    assert counts == {"handed_over": MAX_HOPS, "unserved": 1}
    assert 2.0 < took < 10, took  # the waits between hand-overs (about 3.5 s in all), not a spin
    assert [r.state for r in await harness.runs(job)] == ["queued"]
    info = await harness.stream.info()
    assert info.pending == 0 and info.length == 1 + MAX_HOPS  # each hand-over re-added it once, acked the old
