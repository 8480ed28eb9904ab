"""A spread window on real processes (issue 40, item 2): two dispatchers, two executors and an API.
Jobs created through the API alone, one `*/5 * * * * *` and one `every: 5s`, each with `spread: 4s`, run
at every tick plus the offset their name picks (3 s, 2 s), each tick once, and start no
earlier; the ticks API accounts for each shifted tick. Watched only through the runs they make."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import pytest

from cronos.spread import offset_s
from tests.cluster.harness import Cluster
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

MakeCluster = Callable[..., Cluster]
JOBS = {
    "spread-cron": {"cron_expression": "*/5 * * * * *"},
    "spread-a": {"every": "5s"},
}


async def _get(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as reply:
        assert reply.status == 200, await reply.text()
        return await reply.json()


async def test_runs_start_at_each_tick_plus_the_offset_the_name_picks(make_cluster: MakeCluster) -> None:
    assert [offset_s(name, "4s") for name in JOBS] == [3, 2]
    cluster = make_cluster(dispatchers=2, executors=2, api=True)
    base = f"http://127.0.0.1:{cluster.api_port}"
    async with aiohttp.ClientSession() as session:

        async def create(name: str) -> dict[str, Any] | None:
            body = {"name": name, "spread": "4s", "payload": {"action": "noop"}, **JOBS[name]}
            try:
                async with session.post(f"{base}/api/jobs", json=body) as reply:
                    return dict(await reply.json()) if reply.status == 201 else None
            except aiohttp.ClientError:
                return None  # the API is still starting

        jobs = [await wait_for(lambda n=n: create(n), timeout=30, interval=0.2, what=f"job {n}") for n in JOBS]
        wide = {"name": "too-wide", "spread": "5s", "every": "5s", "payload": {"action": "noop"}}
        async with session.post(f"{base}/api/jobs", json=wide) as reply:
            problem = await reply.json()
            assert reply.status == 422 and "$.spread" in str(problem) and "shortest gap" in str(problem), problem

        async def completed(job: dict[str, Any]) -> list[dict[str, Any]] | None:
            page = await _get(session, f"{base}/api/jobs/{job['id']}/runs?state=completed&limit=200")
            runs = [r for r in page["items"] if r["trigger"] == "schedule"]
            return runs if len(runs) >= 3 else None

        for job in jobs:
            what = f"3 runs of {job['name']}"
            runs = await wait_for(lambda j=job: completed(j), timeout=60, interval=0.25, what=what)
            shift = offset_s(job["name"], "4s")
            ticks = [datetime.fromisoformat(r["scheduled_for"]) for r in runs]
            assert {(t.second % 5, t.microsecond) for t in ticks} == {(shift, 0)}, ticks
            assert len(ticks) == len(set(ticks)), "each shifted tick one run"
            assert all(datetime.fromisoformat(r["started_at"]) >= datetime.fromisoformat(r["scheduled_for"])
                       for r in runs), "no run starts before its tick plus the offset"  # fmt: skip
            got = await _get(session, f"{base}/api/jobs/{job['id']}")
            assert got["spread"] == "4s"
            assert datetime.fromisoformat(got["next_run_at"]).second % 5 == shift
            since, until = min(ticks) - timedelta(seconds=1), max(ticks)
            page = await _get(session, f"{base}/api/jobs/{job['id']}/ticks?from={since:%Y-%m-%dT%H:%M:%S.%fZ}"
                              f"&to={until:%Y-%m-%dT%H:%M:%S.%fZ}")  # fmt: skip
            accounted = [datetime.fromisoformat(t["scheduled_for"]) for t in page["items"]]
            assert set(ticks) <= set(accounted) and {t.second % 5 for t in accounted} == {shift}, accounted
    cluster.assert_alive()
