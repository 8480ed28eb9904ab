"""GET /api/cluster: leader and epoch, nodes with heartbeats, the stream's backlog."""

from __future__ import annotations

from typing import Any

import asyncpg

from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.presence import beat
from cronos.settings import Settings
from cronos.stream import RunStream
from tests.integration.api_client import running_api


async def test_cluster_view(settings: Settings, redis_client: Any, pg_pool: asyncpg.Pool) -> None:
    keys = Keys(settings.key_prefix)
    await redis_client.set(keys.leader, "disp-1", px=5000)
    await pg_pool.execute("UPDATE leader_epoch SET epoch = 7, holder = 'disp-1', elected_at = now() WHERE id = 1")
    await beat(redis_client, keys, "dispatcher", "disp-1", 10)
    await beat(redis_client, keys, "dispatcher", "disp-2", 10)
    await beat(redis_client, keys, "executor", "exec-1", 10, slots=16)
    stream = RunStream(redis_client, keys)
    await stream.ensure_group()
    tokens = [
        RunToken(run_id=i, job_id=1, scheduled_for_ms=1000 * i, attempt=1, trigger="schedule", epoch=7)
        for i in range(1, 4)
    ]
    await stream.publish(tokens)
    await stream.read("exec-1", count=2, block_ms=None)  # two delivered, unacknowledged

    async with running_api(settings) as api:
        reply = await api.call("GET", "/api/cluster")
    assert reply.status == 200
    body = reply.body
    assert body["leader"] == {"node_id": "disp-1", "epoch": 7, "epoch_holder": "disp-1"}
    assert [(n["role"], n["node_id"]) for n in body["nodes"]] == [
        ("dispatcher", "disp-1"),
        ("dispatcher", "disp-2"),
        ("executor", "exec-1"),
    ]
    executor = body["nodes"][2]
    assert executor["info"] == {"slots": "16"}
    assert executor["last_heartbeat"].endswith("Z") and 0 <= executor["age_s"] < 10
    assert body["stream"] == {"length": 3, "pending": 2, "lag": 1, "consumers": {"exec-1": 2}}
    assert (body["database"], body["cache"]) == ("connected", "connected")
    assert body["cluster_id"] == await pg_pool.fetchval("SELECT id::text FROM cluster_identity")
    # Reads only: the API created no key of its own.
    names = sorted([k.decode() async for k in redis_client.scan_iter(match=f"{settings.key_prefix}*")])
    assert names == sorted(
        [
            keys.leader,
            keys.stream,
            *(
                keys.node_heartbeat(r, n)
                for r, n in (("dispatcher", "disp-1"), ("dispatcher", "disp-2"), ("executor", "exec-1"))
            ),
        ]
    )


async def test_cluster_view_of_an_empty_cluster(settings: Settings) -> None:
    async with running_api(settings) as api:
        reply = await api.call("GET", "/api/cluster")
    assert reply.status == 200
    assert reply.body["leader"] == {"node_id": None, "epoch": 0, "epoch_holder": None}
    assert reply.body["nodes"] == [] and reply.body["stream"] == {
        "length": 0,
        "pending": 0,
        "lag": None,
        "consumers": {},
    }
