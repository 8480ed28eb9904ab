"""Several schedules per job on real processes (issue 40, item 1): two dispatchers, two executors and
an API. A job created through the API alone, firing every 2 s with one more entry every 3 s, runs at
every instant of the union and at the instants both share (every 6 s) once; the ticks API accounts
for each tick. Watched only through the runs it makes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from cronos.ticks import UNACCOUNTED
from tests.cluster.harness import Cluster
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

MakeCluster = Callable[..., Cluster]
SECOND = timedelta(seconds=1)


def _union(t: datetime) -> bool:
    return t.microsecond == 0 and (t.second % 2 == 0 or t.second % 3 == 0)


async def _get(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as reply:
        assert reply.status == 200, await reply.text()
        return await reply.json()


async def test_a_job_with_two_entries_fires_on_the_union_and_a_shared_instant_runs_once(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(dispatchers=2, executors=2, api=True)
    base = f"http://127.0.0.1:{cluster.api_port}"
    body = {"name": "two-entries", "cron_expression": "*/2 * * * * *", "schedules": [{"cron": "*/3 * * * * *"}],
            "payload": {"action": "noop"}}  # fmt: skip
    async with aiohttp.ClientSession() as session:

        async def created() -> dict[str, Any] | None:
            try:
                async with session.post(f"{base}/api/jobs", json=body) as reply:
                    return dict(await reply.json()) if reply.status == 201 else None
            except aiohttp.ClientError:
                return None  # the API is still starting

        job = await wait_for(created, timeout=30, interval=0.2, what="the job created through the API")
        since = datetime.fromisoformat(job["created_at"])

        async def completed() -> list[datetime] | None:
            page = await _get(session, f"{base}/api/jobs/{job['id']}/runs?state=completed&limit=200")
            ticks = [datetime.fromisoformat(r["scheduled_for"]) for r in page["items"] if r["trigger"] == "schedule"]
            return ticks if sum(t.second % 6 == 0 for t in ticks) >= 2 and len(ticks) >= 10 else None

        await wait_for(completed, timeout=60, interval=0.25, what="10 runs, two of them at shared instants")
        until = datetime.fromisoformat((await _get(session, f"{base}/api/jobs/{job['id']}"))["last_scheduled_for"])
        url = f"{base}/api/jobs/{job['id']}/ticks?from={quote(since.isoformat())}&to={quote(until.isoformat())}"

        async def settled() -> list[dict[str, Any]] | None:
            ticks = (await _get(session, url + "&limit=500"))["items"]
            return None if any(t["outcome"] == "pending" or t["reason"] == UNACCOUNTED for t in ticks) else ticks

        accounted = await wait_for(settled, timeout=30, interval=0.25, what="the union's ticks accounted for")
        runs = (await _get(session, f"{base}/api/jobs/{job['id']}/runs?limit=200"))["items"]

    scheduled = sorted(datetime.fromisoformat(r["scheduled_for"]) for r in runs if r["trigger"] == "schedule")
    assert len(scheduled) == len(set(scheduled)), "each tick one run, the shared ones too"
    expected, t = [], since.replace(microsecond=0) + SECOND
    while t <= until:
        expected += [t] if _union(t) else []
        t += SECOND
    assert [datetime.fromisoformat(tick["scheduled_for"]) for tick in accounted] == expected
    assert all(tick["outcome"] == "ran" and len(tick["runs"]) == 1 for tick in accounted), accounted
    assert [t for t in scheduled if t <= until] == expected, "every instant of the union ran, none twice"
    cluster.assert_alive()
