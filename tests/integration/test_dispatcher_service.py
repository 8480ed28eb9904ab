"""The Dispatcher role in-process against real services: LISTEN, re-push, handover, reaper."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec
import pytest
import redis.asyncio as aioredis

from cronos import presence
from cronos.keys import Keys
from cronos.settings import Settings
from cronos.store.jobs import JobStore
from cronos.stream import RunStream
from dispatcher.service import Dispatcher
from tests.waiting import wait_for


@contextlib.asynccontextmanager
async def running(*settings: Settings) -> AsyncIterator[list[Dispatcher]]:
    roles = [Dispatcher(s) for s in settings]
    async with contextlib.AsyncExitStack() as stack:
        tasks = []
        for role in roles:
            await stack.enter_async_context(role)
            tasks.append(asyncio.create_task(role.run()))
        try:
            yield roles
        finally:
            for role in roles:
                role.stop()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)


def leading(roles: list[Dispatcher]) -> list[Dispatcher]:
    return [r for r in roles if r.election is not None and r.election.leading]


async def add_job(pool: asyncpg.Pool, name: str, expression: str = "* * * * * *") -> int:
    async with pool.acquire() as conn, conn.transaction():
        job_id = await conn.fetchval(
            "INSERT INTO jobs (name, cron_expression, last_scheduled_for) VALUES ($1, $2, now()) RETURNING id",
            name,
            expression,
        )
        await conn.execute("SELECT pg_notify('cronos_jobs', $1)", f'{{"op": "created", "job_id": {job_id}}}')
    return int(job_id)


async def stream_run_ids(redis_client: aioredis.Redis, keys: Keys) -> list[int]:
    stream = RunStream(redis_client, keys)
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await redis_client.xrange(stream.key)  # type: ignore[assignment]
    return [int(msgspec.msgpack.decode(fields[b"t"])["run_id"]) for _entry_id, fields in entries]


def scheduled(pool: asyncpg.Pool, job_id: int) -> Callable[[], Awaitable[list[datetime]]]:
    async def probe() -> list[datetime]:
        rows = await pool.fetch("SELECT scheduled_for FROM runs WHERE job_id = $1 ORDER BY scheduled_for", job_id)
        return [r["scheduled_for"] for r in rows]

    return probe


async def test_api_changes_reach_the_leader_within_a_second(
    settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis
) -> None:
    keys = Keys(settings.key_prefix)
    async with running(settings) as roles:
        await wait_for(lambda: _true(leading(roles)), timeout=5, what="a leader")
        control = await add_job(pg_pool, "control")
        created_at = datetime.now(UTC)
        job = await add_job(pg_pool, "watched")
        ticks = await wait_for(scheduled(pg_pool, job), timeout=3, what="the new job's first run")
        assert ticks[0] <= created_at + timedelta(seconds=2), "dispatched from its first tick"

        paused = await JobStore(pg_pool).set_status(job, "paused")
        paused_at = paused.updated_at
        await wait_for(lambda: _true(job not in roles[0].ticker.book), timeout=1.0, what="pause applied")  # type: ignore[union-attr]
        await wait_for(
            lambda: _latest_after(pg_pool, control, paused_at + timedelta(seconds=2)), timeout=5, what="control ticks"
        )
        after_pause = [t for t in await scheduled(pg_pool, job)() if t > paused_at + timedelta(seconds=1)]
        assert after_pause == []

        queued = {r["id"] for r in await pg_pool.fetch("SELECT id FROM runs WHERE state = 'queued'")}
        await wait_for(lambda: _contains(redis_client, keys, queued), timeout=3, what="tokens for every queued run")
    assert await redis_client.get(keys.leader) is None, "a clean stop releases the leader lock"


async def test_three_candidates_one_leader_and_an_immediate_handover_on_stop(
    settings: Settings, redis_client: aioredis.Redis
) -> None:
    nodes = [msgspec.structs.replace(settings, node_id=f"{settings.node_id}-{i}") for i in range(3)]
    async with running(*nodes) as roles:
        await wait_for(lambda: _true(leading(roles)), timeout=5, what="a leader")
        campaigns: dict[str, set[str]] = {}

        async def followers_lost_a_few_campaigns() -> bool:
            assert len(leading(roles)) == 1, "one leader at a time"
            for node in await presence.nodes(redis_client, Keys(settings.key_prefix)):
                if node.get("leader") == "0":  # a candidate beats after each campaign it lost
                    campaigns.setdefault(node["node_id"], set()).add(node["last_heartbeat"])
            return len(campaigns) == 2 and all(len(beats) >= 3 for beats in campaigns.values())

        await wait_for(followers_lost_a_few_campaigns, timeout=5, what="the others campaigning, and losing")
        (first,) = leading(roles)
        first_epoch = first.election.epoch  # type: ignore[union-attr]
        first.stop()
        others = [r for r in roles if r is not first]
        took_over = asyncio.get_running_loop().time()
        await wait_for(lambda: _true(leading(others)), timeout=2, what="a new leader")
        assert asyncio.get_running_loop().time() - took_over < 1.0
        (second,) = leading(others)
        assert second.election.epoch > first_epoch  # type: ignore[operator, union-attr]


async def test_redis_losing_the_stream_makes_the_leader_repush(
    settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis
) -> None:
    keys = Keys(settings.key_prefix)
    job = await add_job(pg_pool, "manual-only", "0 0 1 1 *")
    async with running(settings) as roles:
        await wait_for(lambda: _true(leading(roles)), timeout=5, what="a leader")
        run = await JobStore(pg_pool).trigger(job)
        await wait_for(lambda: _contains(redis_client, keys, {run.id}), timeout=2, what="the manual run's token")
        await redis_client.delete(keys.stream)
        await wait_for(lambda: _contains(redis_client, keys, {run.id}), timeout=4, what="the token re-pushed")
        assert await RunStream(redis_client, keys).group_exists()


async def test_the_leaders_watchdog_pushes_again_a_token_nobody_claimed(
    settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis
) -> None:
    """A token lost after its push (deleted here; an executor that died holding it, in life) is
    pushed again once its run is CRONOS_OVERDUE_AFTER_MS past due, Redis' data being intact."""
    keys = Keys(settings.key_prefix)
    job = await add_job(pg_pool, "manual-only", "0 0 1 1 *")
    async with running(msgspec.structs.replace(settings, overdue_after_ms=500)) as roles:
        await wait_for(lambda: _true(leading(roles)), timeout=5, what="a leader")
        run = await JobStore(pg_pool).trigger(job)
        await wait_for(lambda: _contains(redis_client, keys, {run.id}), timeout=2, what="the manual run's token")
        (entry_id, _fields), *_ = await redis_client.xrange(keys.stream)
        await redis_client.xdel(keys.stream, entry_id)
        assert run.id not in await stream_run_ids(redis_client, keys)
        await wait_for(lambda: _contains(redis_client, keys, {run.id}), timeout=4, what="the token pushed again")


async def test_the_leader_reaps_runs_whose_executor_is_gone(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    job = await add_job(pg_pool, "lost", "0 0 1 1 *")
    run_id = await pg_pool.fetchval(
        "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at, node_id, started_at, lease_until)"
        " VALUES ($1, now(), 'manual', 'running', now(), 'dead-node', now(), now() - interval '1 s') RETURNING id",
        job,
    )
    async with running(settings):

        async def reaped() -> bool:
            row = await pg_pool.fetchrow("SELECT state, error FROM runs WHERE id = $1", run_id)
            return row is not None and (row["state"], row["error"]) == ("failed", "executor lost")

        await wait_for(reaped, timeout=6, what="the lost run reaped")


async def _true(value: object) -> bool:
    return bool(value)


async def _contains(redis_client: aioredis.Redis, keys: Keys, run_ids: set[int]) -> bool:
    return run_ids <= set(await stream_run_ids(redis_client, keys))


async def _latest_after(pool: asyncpg.Pool, job_id: int, instant: datetime) -> bool:
    latest = await pool.fetchval("SELECT max(scheduled_for) FROM runs WHERE job_id = $1", job_id)
    return latest is not None and latest >= instant


async def test_an_unexpected_redis_reply_in_housekeeping_is_logged_and_the_term_goes_on(
    settings: Settings, redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    keys = Keys(settings.key_prefix)
    caplog.set_level(logging.WARNING)
    async with running(settings) as roles:
        await wait_for(lambda: _true(leading(roles)), timeout=5, what="a leader")
        (leader,) = leading(roles)
        epoch = leader.election.epoch  # type: ignore[union-attr]
        # Its term has started once it marked the Redis it pushes to (the last step of its start).
        await wait_for(lambda: redis_client.exists(keys.redis_marker), timeout=5, what="the term started")
        await redis_client.delete(keys.stream)
        await redis_client.set(keys.stream, "not a stream")  # every stream command on it: WRONGTYPE
        await wait_for(lambda: _logged(caplog, "housekeeping.failed"), timeout=5, what="the failure logged")
        assert leading(roles) == [leader] and leader.election.epoch == epoch  # type: ignore[union-attr]
        await redis_client.delete(keys.stream)
        stream = RunStream(redis_client, keys)
        await wait_for(stream.group_exists, timeout=5, what="the stream and group recreated")
        assert leading(roles) == [leader] and leader.election.epoch == epoch  # type: ignore[union-attr]


async def _logged(caplog: pytest.LogCaptureFixture, event: str) -> bool:
    return any(getattr(r, "event", None) == event for r in caplog.records)


async def test_a_run_stream_it_cannot_prepare_keeps_it_a_candidate_not_dead(
    settings: Settings, redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    keys = Keys(settings.key_prefix)
    await redis_client.set(keys.stream, "not a stream")  # XGROUP CREATE on it: WRONGTYPE
    caplog.set_level(logging.WARNING)
    async with running(settings) as roles:
        await wait_for(lambda: _logged(caplog, "dispatcher.redis_unavailable"), timeout=5, what="the refusal logged")
        await redis_client.delete(keys.stream)
        await wait_for(lambda: redis_client.exists(keys.redis_marker), timeout=15, what="a term started")
        assert len(leading(roles)) == 1
