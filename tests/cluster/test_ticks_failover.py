"""GET /api/jobs/{id}/ticks after a kill -9 of the leader (real processes): every tick of an
every-second job from before the fault to after the recovery is accounted for, against the
independent reference schedule (tests/cluster/ticks.py): each ran, none is unaccounted."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from cronos.ticks import UNACCOUNTED
from tests.cluster.checker import JobDef
from tests.cluster.harness import Cluster
from tests.cluster.scenario import Workload, recovered, wait_ready
from tests.cluster.ticks import expected_ticks
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

MakeCluster = Callable[..., Cluster]


async def _create(session: aiohttp.ClientSession, base: str) -> JobDef:
    body = {"name": "every-second", "cron_expression": "* * * * * *", "payload": {"action": "noop"}}

    async def created() -> dict[str, Any] | None:
        try:
            async with session.post(f"{base}/api/jobs", json=body) as reply:
                return dict(await reply.json()) if reply.status == 201 else None
        except aiohttp.ClientError:
            return None  # the API is still starting

    job = await wait_for(created, timeout=30, interval=0.2, what="the job created through the API")
    return JobDef(id=job["id"], cron_expression=job["cron_expression"],
                  created_at=datetime.fromisoformat(job["created_at"]))  # fmt: skip


async def _ticks(session: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with session.get(url) as reply:
        assert reply.status == 200, await reply.text()
        body = await reply.json()
        assert body["next_cursor"] is None, "one page holds the window"
        return list(body["items"])


async def test_after_a_leader_kill_9_every_tick_is_accounted_for(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(dispatchers=2, executors=2, api=True)
    base = f"http://127.0.0.1:{cluster.api_port}"
    async with aiohttp.ClientSession() as session:
        job = await _create(session, base)
        workload = Workload(probe=job, jobs=[job])
        start = await wait_ready(cluster, workload)
        fault = await recovered(cluster, workload, "kill_leader")
        assert fault.recovered_at is not None
        until = fault.recovered_at + timedelta(seconds=2)
        url = f"{base}/api/jobs/{job.id}/ticks?from={quote(start.isoformat())}&to={quote(until.isoformat())}&limit=500"

        async def settled() -> list[dict[str, Any]] | None:
            ticks = await _ticks(session, url)
            return None if any(t["outcome"] == "pending" or t["reason"] == UNACCOUNTED for t in ticks) else ticks

        try:
            ticks = await wait_for(settled, timeout=30, interval=0.25, what="the window's ticks settled")
        except AssertionError:
            left = [t for t in await _ticks(session, url) if t["outcome"] != "ran"]
            raise AssertionError(f"ticks not accounted for after the kill: {left}") from None

    reference = expected_ticks("* * * * * *", "UTC", start - timedelta(microseconds=1), until)
    assert [datetime.fromisoformat(t["scheduled_for"]) for t in ticks] == reference
    assert {t["outcome"] for t in ticks} == {"ran"}, [t for t in ticks if t["outcome"] != "ran"]
    killed = datetime.fromtimestamp(fault.started, UTC)
    caught_up = [t for t in ticks if killed < datetime.fromisoformat(t["scheduled_for"]) < fault.recovered_at]
    assert caught_up, "the kill left ticks for the next leader"
    assert all(t["runs"][0]["start_delay_s"] is not None for t in caught_up)
