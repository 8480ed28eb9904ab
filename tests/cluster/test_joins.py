"""Failure paths and joins end to end (issue 40, item 5), every part a real process: `cronos api`,
`cronos dispatcher` (the leader: scheduler, join timeouts) and `cronos executor`. Jobs created
through the API alone, watched only through the runs they make: a failed parent starts its
`failed` child (after its last attempt only); a child joining two parents runs once per tick after
both; a join whose second parent never ends that tick runs or is skipped at its timeout, saying why.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.cluster.cli_api import REPO, api_process, clean_env
from tests.cluster.test_notify_end_to_end import _call, leader_and_executor  # noqa: F401  (a fixture)
from tests.services import Services
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("leader_and_executor"), pytest.mark.timeout(120)]

OK = {"action": "notify.check", "ok": True}  # tests.cluster.notify_tasks: completes
FAILS = {"action": "notify.check"}  # fails


@pytest.fixture
def cluster_env(services: Services, database_url: str, key_prefix: str) -> dict[str, str]:
    return clean_env(
        DATABASE_URL=database_url, REDIS_URL=services.redis_url, CRONOS_KEY_PREFIX=key_prefix,
        CRONOS_LOG_FORMAT="json", CRONOS_HTTP_ALLOW_NETS="127.0.0.0/8", CRONOS_LEADER_TTL_MS="1000",
        PYTHONPATH=str(REPO),
    )  # fmt: skip


class Cluster:
    def __init__(self, http: aiohttp.ClientSession, api: str) -> None:
        self.http, self.api = http, api

    async def job(self, name: str, payload: dict[str, Any], **fields: Any) -> int:
        body = {"name": name, "cron_expression": "@never", "payload": payload, **fields}
        return int((await _call(self.http, "POST", f"{self.api}/api/jobs", body))["id"])

    async def runs(self, job: int) -> list[dict[str, Any]]:
        return list((await _call(self.http, "GET", f"{self.api}/api/jobs/{job}/runs?limit=500"))["items"])

    async def ended(self, job: int, count: int) -> list[dict[str, Any]] | None:
        """The job's runs once at least `count` of them ended and none is pending or running."""
        runs = await self.runs(job)
        done = [r for r in runs if r["state"] in ("completed", "failed", "skipped", "cancelled")]
        return runs if len(done) >= count and len(done) == len(runs) else None

    async def trigger(self, job: int) -> None:
        await _call(self.http, "POST", f"{self.api}/api/jobs/{job}/trigger", {})


async def _cluster_test(cluster_env: dict[str, str], tmp_path: Path, body: Any) -> None:
    variables = {k: cluster_env[k] for k in ("REDIS_URL", "CRONOS_HTTP_ALLOW_NETS")}
    with api_process(tmp_path, cluster_env["DATABASE_URL"], cluster_env["CRONOS_KEY_PREFIX"], **variables) as api:
        async with aiohttp.ClientSession() as http:
            await body(Cluster(http, api))


async def test_a_failed_parent_starts_its_failed_child_after_its_last_attempt(
    cluster_env: dict[str, str], tmp_path: Path
) -> None:
    async def body(c: Cluster) -> None:
        parent = await c.job("export", FAILS, max_retries=1, retry_backoff_s=0)
        rollback = await c.job("rollback", OK, parents=[parent], chain={"on": {str(parent): "failed"}})
        on_success = await c.job("publish", OK, parents=[parent])
        await c.trigger(parent)
        (run,) = await wait_for(lambda: c.ended(rollback, 1), timeout=30, interval=0.2, what="rollback's run")
        attempts = sorted(await c.runs(parent), key=lambda r: r["attempt"])
        assert [(r["attempt"], r["state"]) for r in attempts] == [(1, "failed"), (2, "failed")]
        assert (run["trigger"], run["state"], run["parent_run_id"]) == ("chain", "completed", attempts[1]["id"])
        assert await c.runs(on_success) == [], "the default edge waits for completed"

    await _cluster_test(cluster_env, tmp_path, body)


async def test_a_two_parent_join_runs_once_per_tick_after_both(cluster_env: dict[str, str], tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        every = "*/2 * * * * *"
        a = await c.job("extract-a", OK, cron_expression=every, status="paused")
        b = await c.job("extract-b", OK, cron_expression=every, status="paused")
        load = await c.job("load", OK, parents=[a, b], chain={"join": {"timeout_s": 60}})
        for job in (a, b):  # resumed together: both have each tick from here on
            await _call(c.http, "PATCH", f"{c.api}/api/jobs/{job}", {"status": "active"})
        await wait_for(lambda: c.ended(load, 3), timeout=40, interval=0.2, what="three load runs")
        for job in (a, b):
            await _call(c.http, "PATCH", f"{c.api}/api/jobs/{job}", {"status": "paused"})
        loads = [r for r in await wait_for(lambda: c.ended(load, 3), timeout=20, what="load to settle")]
        parents = {r["id"]: r for job in (a, b) for r in await c.runs(job)}
        completed = [r["scheduled_for"] for r in parents.values() if r["state"] == "completed"]
        both = {t for t in completed if completed.count(t) == 2}
        ticks = [r["scheduled_for"] for r in loads]
        assert len(ticks) == len(set(ticks)), "exactly one load run per tick"
        assert set(ticks) <= both and all(r["trigger"] == "chain" for r in loads), (loads, both)
        joins = (await _call(c.http, "GET", f"{c.api}/api/jobs/{load}/joins?limit=500"))["items"]
        for run in loads:
            (join,) = [j for j in joins if j["run_id"] == run["id"]]
            assert sorted(join["parents"]) == [a, b] and join["decided"] == "ran", join
            assert run["parent_run_id"] in join["runs"]
            started = datetime.fromisoformat(run["started_at"])
            assert all(datetime.fromisoformat(parents[r]["finished_at"]) <= started for r in join["runs"]), "after both"

    await _cluster_test(cluster_env, tmp_path, body)


async def test_a_join_timeout_runs_or_skips_the_child_with_the_reason(
    cluster_env: dict[str, str], tmp_path: Path
) -> None:
    async def body(c: Cluster) -> None:
        a, b = await c.job("a", OK), await c.job("b", OK)
        runs = await c.job("runs-anyway", OK, parents=[a, b], chain={"join": {"timeout_s": 1, "on_timeout": "run"}})
        skips = await c.job("skips", OK, parents=[a, b], chain={"join": {"timeout_s": 1}})
        await c.trigger(a)  # b has no run of this tick: the joins time out
        (ran,) = await wait_for(lambda: c.ended(runs, 1), timeout=30, interval=0.2, what="the run at the timeout")
        (skipped,) = await wait_for(lambda: c.ended(skips, 1), timeout=30, interval=0.2, what="the skip")
        (parent,) = await c.runs(a)
        reason = f"join timed out after 1 s waiting for parent(s) {b}"
        assert (ran["state"], ran["scheduled_for"], ran["parent_run_id"]) == (
            "completed",
            parent["scheduled_for"],
            parent["id"],
        )
        assert (skipped["state"], skipped["skip_reason"]) == ("skipped", reason)
        (join,) = (await _call(c.http, "GET", f"{c.api}/api/jobs/{runs}/joins"))["items"]
        assert (join["decided"], join["reason"], join["run_id"]) == ("ran", reason, ran["id"])

    await _cluster_test(cluster_env, tmp_path, body)
