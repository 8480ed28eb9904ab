"""Executors that leave are removed from the stream's consumer group and from /api/cluster (issue 27).

A dispatcher, three executors and the API, as real processes, run 30 every-second jobs: every
executor reads tokens (a consumer each) and shows its share of the runs in /api/cluster. Then:
(a) e1 gets SIGTERM: once it has exited, its consumer is gone from XINFO CONSUMERS and its node
from /api/cluster, at once; (b) e2 is killed (-9): its consumer stays behind until the leader
removes it, past CRONOS_CONSUMER_IDLE_REMOVE_S (short here) and only once nothing is pending for
it. Over the whole window every tick ran exactly once (the checker), e3 serving alone at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from cronos.stream_members import StreamMembers
from tests.cluster.cli_api import get
from tests.cluster.harness import Cluster
from tests.cluster.ledger import insert_job
from tests.cluster.scenario import Workload, assert_ok, wait_ready
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(150)]

IDLE_REMOVE_S = 4.0
JOBS = 30


def _cluster_view(cluster: Cluster) -> dict[str, Any]:
    view: dict[str, Any] = get(f"http://127.0.0.1:{cluster.api_port}", "/api/cluster")
    return view


def _executors(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["node_id"]: n for n in view["nodes"] if n["role"] == "executor"}


async def test_executors_that_leave_are_removed_from_the_group_and_the_cluster_view(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(
        dispatchers=1, executors=3, api=True, extra_env={"CRONOS_CONSUMER_IDLE_REMOVE_S": f"{IDLE_REMOVE_S:g}"}
    )
    assert cluster.redis_server is not None
    client = aioredis.Redis.from_url(cluster.redis_server.url)
    members = StreamMembers(client, cluster.keys)

    async def consumers() -> dict[str, int]:
        return {m.name: m.pending for m in await members.of(["default"])}

    try:
        jobs = [
            await insert_job(cluster.dsn, f"every-second-{i}", "* * * * * *", payload={"action": "noop"})
            for i in range(JOBS)
        ]
        workload = Workload(probe=jobs[0], jobs=jobs)
        start = await wait_ready(cluster, workload)

        async def all_serving() -> bool:
            executors = _executors(_cluster_view(cluster))
            sharing = all((executors.get(n) or {}).get("runs", {}).get("started", 0) > 0 for n in ("e1", "e2", "e3"))
            return sharing and set(await consumers()) == {"e1", "e2", "e3"}

        await wait_for(all_serving, timeout=30, interval=0.5, what="every executor to read and start runs")
        shares = {n: e["runs"]["share_pct"] for n, e in _executors(_cluster_view(cluster)).items()}
        assert sum(shares.values()) == pytest.approx(100.0, abs=0.5), shares

        # (a) A clean stop: gone from the group and the cluster view as the process exits.
        e1 = cluster.nodes["e1"]
        cluster.terminate(e1)
        assert e1.proc is not None and e1.proc.returncode == 0
        assert "e1" not in await consumers()
        assert "e1" not in _executors(_cluster_view(cluster))
        assert any(r.get("event") == "executor.left" for r in e1.records())

        # (b) kill -9: left behind, until the leader removes it past the bound.
        killed_at = cluster.kill(cluster.nodes["e2"])
        assert "e2" in await consumers()

        async def removed() -> bool:
            return "e2" not in await consumers()

        await wait_for(removed, timeout=IDLE_REMOVE_S + 3 * cluster.lease_s + 15, interval=0.2, what="e2 removed")
        assert time.time() - killed_at >= IDLE_REMOVE_S - 1.5  # not before the bound (idle since its last read)
        (leader,) = cluster.role("dispatcher")
        assert any(r.get("event") == "stream.consumer_removed" and r.get("consumer") == "e2" for r in leader.records())
        assert set(await consumers()) == {"e3"}
        assert set(_executors(_cluster_view(cluster))) == {"e3"}  # e2's presence expired meanwhile

        await assert_ok(cluster, workload, start)  # no tick lost or doubled across both departures
    finally:
        await client.aclose()
