"""Leader election between real `cronos dispatcher` processes: one leader, kill -9, SIGSTOP (G5)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis

from cronos.keys import Keys
from tests.services import Services
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster

TTL_MS = 1000
CRONOS = str(Path(sys.executable).with_name("cronos"))


class Node:
    def __init__(self, node_id: str, env: dict[str, str], log_dir: Path) -> None:
        self.node_id = node_id
        self.log = log_dir / f"{node_id}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [CRONOS, "dispatcher"], env={**env, "CRONOS_NODE_ID": node_id}, stdout=out, stderr=subprocess.STDOUT
            )

    def events(self) -> list[str]:
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                found.append(json.loads(line).get("event", ""))
            except ValueError:
                continue
        return found

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def start_nodes(services: Services, database_url: str, key_prefix: str, tmp_path: Path) -> Iterator[object]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DATABASE_URL": database_url,
        "REDIS_URL": services.redis_url,
        "CRONOS_KEY_PREFIX": key_prefix,
        "CRONOS_LEADER_TTL_MS": str(TTL_MS),
        "CRONOS_LOG_FORMAT": "json",
        "CRONOS_RUN_LEASE_S": "5",
    }
    nodes: list[Node] = []

    def start(count: int) -> list[Node]:
        started = [Node(f"n{len(nodes) + i}", env, tmp_path) for i in range(count)]
        nodes.extend(started)
        return started

    try:
        yield start
    finally:
        for node in nodes:
            node.kill()


async def _holder(redis_client: aioredis.Redis, keys: Keys) -> str | None:
    value = await redis_client.get(keys.leader)
    return value.decode() if isinstance(value, bytes) else value


async def test_three_candidates_elect_exactly_one_and_fail_over_within_ttl_after_kill_9(
    start_nodes: object, redis_client: aioredis.Redis, key_prefix: str, pg_pool: asyncpg.Pool
) -> None:
    keys = Keys(key_prefix)
    nodes = start_nodes(3)  # type: ignore[operator]
    holder = await wait_for(lambda: _holder(redis_client, keys), timeout=20, what="a leader")
    await wait_for(lambda: _presence_count(redis_client, keys, 3), timeout=10, what="three candidates beating")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # stable: one holder, one epoch, one node saying it leads
        assert await _holder(redis_client, keys) == holder
        assert await pg_pool.fetchval("SELECT count(*) FROM leader_log") == 1
        assert await _presence_leaders(redis_client, keys) in ([], [holder])
        await _sleep(0.1)
    assert await _presence_leaders(redis_client, keys) == [holder]

    leader = next(n for n in nodes if n.node_id == holder)
    leader.proc.kill()  # SIGKILL: no clean release, the lock has to expire
    killed_at = time.monotonic()

    async def new_leader() -> str | None:
        row = await pg_pool.fetchrow("SELECT holder FROM leader_epoch WHERE id = 1")
        return row["holder"] if row and row["holder"] != holder else None

    successor = await wait_for(new_leader, timeout=5, interval=0.01, what="a new leader")
    elapsed = time.monotonic() - killed_at
    assert elapsed < TTL_MS / 1000 + 1.0, f"failover took {elapsed:.2f}s"
    assert await _holder(redis_client, keys) == successor
    assert await pg_pool.fetchval("SELECT count(*) FROM leader_log") == 2


async def test_a_sigstopped_leader_resumed_after_two_ttls_writes_nothing(
    start_nodes: object, redis_client: aioredis.Redis, key_prefix: str, pg_pool: asyncpg.Pool
) -> None:
    keys = Keys(key_prefix)
    job = await pg_pool.fetchval(
        "INSERT INTO jobs (name, cron_expression, misfire_policy, last_scheduled_for)"
        " VALUES ('every-second', '* * * * * *', 'run_all', now()) RETURNING id"
    )
    nodes = start_nodes(2)  # type: ignore[operator]
    holder = await wait_for(lambda: _holder(redis_client, keys), timeout=20, what="a leader")
    leader = next(n for n in nodes if n.node_id == holder)
    # The Redis lock is won before the epoch is taken in PostgreSQL: wait for the holder's epoch.
    epoch = await wait_for(lambda: _epoch_of(pg_pool, holder), timeout=5, what="the leader's epoch")
    await wait_for(lambda: _runs_of_epoch(pg_pool, epoch, at_least=2), timeout=10, what="the leader dispatching")

    leader.proc.send_signal(signal.SIGSTOP)
    await _sleep(2 * TTL_MS / 1000)
    successor_epoch = await wait_for(lambda: _epoch_above(pg_pool, epoch), timeout=5, what="a new leader")
    assert successor_epoch is not None
    written_before = await pg_pool.fetchval("SELECT count(*) FROM runs WHERE epoch = $1", epoch)

    leader.proc.send_signal(signal.SIGCONT)
    await wait_for(lambda: _true("leader.lost" in leader.events()), timeout=5, what="the old leader stepping down")
    resumed_at = await pg_pool.fetchval("SELECT now()")
    await wait_for(
        lambda: _runs_of_epoch(pg_pool, successor_epoch, at_least=1, after=resumed_at),
        timeout=5,
        what="the new leader ticking",
    )
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE epoch = $1", epoch) == written_before
    # Ledger and cursor moved together, only by fenced writes: the cursor is the newest tick written.
    cursor, newest = await pg_pool.fetchrow(
        "SELECT j.last_scheduled_for, (SELECT max(scheduled_for) FROM runs r WHERE r.job_id = j.id)"
        " FROM jobs j WHERE j.id = $1",
        job,
    )
    assert cursor == newest
    ticks = [r["scheduled_for"] for r in await pg_pool.fetch("SELECT scheduled_for FROM runs ORDER BY 1")]
    assert len(ticks) == len(set(ticks)) and all((b - a).total_seconds() == 1 for a, b in itertools.pairwise(ticks)), (
        "every second dispatched exactly once across the handover (G1, G2)"
    )
    assert await _holder(redis_client, keys) != holder


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


async def _true(value: bool) -> bool:
    return value


async def _presence_count(redis_client: aioredis.Redis, keys: Keys, expected: int) -> bool:
    return len([k async for k in redis_client.scan_iter(match=keys.node_pattern)]) >= expected


async def _presence_leaders(redis_client: aioredis.Redis, keys: Keys) -> list[str]:
    leaders = []
    async for key in redis_client.scan_iter(match=keys.node_pattern):
        fields = await redis_client.hgetall(key)
        if fields.get(b"leader") == b"1":
            node = fields[b"node_id"]
            leaders.append(node.decode() if isinstance(node, bytes) else node)
    return sorted(leaders)


async def _runs_of_epoch(pool: asyncpg.Pool, epoch: int, *, at_least: int, after: object = None) -> bool:
    count = await pool.fetchval(
        "SELECT count(*) FROM runs WHERE epoch = $1 AND ($2::timestamptz IS NULL OR created_at > $2)", epoch, after
    )
    return bool(count >= at_least)


async def _epoch_of(pool: asyncpg.Pool, holder: str) -> int | None:
    row = await pool.fetchrow("SELECT epoch, holder FROM leader_epoch WHERE id = 1")
    return int(row["epoch"]) if row and row["holder"] == holder else None


async def _epoch_above(pool: asyncpg.Pool, epoch: int) -> int | None:
    current = await pool.fetchval("SELECT epoch FROM leader_epoch")
    return int(current) if current > epoch else None
