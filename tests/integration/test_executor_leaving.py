"""An executor that stops cleanly leaves its stream-group consumer and its presence behind it
(executor.leaving), having counted the runs it started (executor.tally)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import msgspec
import redis.asyncio as aioredis

import cronos
from cronos.keys import Keys
from cronos.metrics import REGISTRY
from cronos.settings import Settings
from cronos.stream import RunStream
from cronos.stream_members import StreamMembers
from executor.service import Executor
from tests.integration.ledger_helpers import Harness
from tests.waiting import wait_for


@cronos.task("test.leaving", replace=True)
async def _noop(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    return None


async def test_a_cleanly_stopped_executor_removes_its_consumer_and_its_presence(
    pg_pool: asyncpg.Pool, redis_client: aioredis.Redis, settings: Settings
) -> None:
    keys = Keys(settings.key_prefix)
    stream = RunStream(redis_client, keys)
    await stream.ensure_group()
    harness = Harness(pg_pool, stream)
    job = await harness.job(payload={"action": "test.leaving"})
    token = await harness.queue(job)
    node = f"{settings.node_id}-leaver"
    members = StreamMembers(redis_client, keys)
    async with Executor(msgspec.structs.replace(settings, node_id=node)) as ex:
        task = asyncio.create_task(ex.run())

        async def completed() -> bool:
            return await harness.state(token.run_id) == "completed"

        await wait_for(completed, what="the run to complete")
        await wait_for(lambda: redis_client.exists(keys.node_heartbeat("executor", node)), what="its presence")
        assert [m.name for m in await members.of(["default"])] == [node]
        ex.stop()
        await asyncio.wait_for(task, 10)
    assert await members.of(["default"]) == []
    assert not await redis_client.exists(keys.node_heartbeat("executor", node))
    assert REGISTRY.get_sample_value("cronos_executor_runs_started_total", {"node": node}) == 1.0
    assert ex.deps is not None and ex.deps.tally.started == 1
