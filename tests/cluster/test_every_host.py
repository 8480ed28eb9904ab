"""Runs on every host with real processes: a job created through the API with `hosts: {}` runs once
per live executor per tick, each run recorded with its host (and run by it); an executor that
stops drops out from the next tick on, and one that joins is added (cronos.every_host)."""

from __future__ import annotations

import signal
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

import cronos
from cronos.settings import Settings
from tests.cluster.test_executor_process import Procs, procs  # noqa: F401  (the fixture)
from tests.integration.api_client import running_api
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster


async def _hosts_by_tick(pool: asyncpg.Pool, job: int) -> dict[datetime, dict[str, tuple[str, str | None]]]:
    """Each tick's per-host runs: host -> (state, the node that ran it)."""
    found: dict[datetime, dict[str, tuple[str, str | None]]] = defaultdict(dict)
    rows = await pool.fetch(
        "SELECT scheduled_for, nullif(host, '') AS host, state, node_id FROM runs WHERE job_id = $1", job
    )
    for r in rows:
        if r["host"] is not None:
            assert r["host"] not in found[r["scheduled_for"]], "two runs of one (tick, host)"
            found[r["scheduled_for"]][r["host"]] = (r["state"], r["node_id"])
    return found


async def test_a_per_host_job_runs_once_per_executor_per_tick_and_follows_the_fleet(
    pg_pool: asyncpg.Pool,
    settings: Settings,
    procs: Procs,  # noqa: F811  (the imported fixture)
) -> None:
    procs.start("leader", "dispatcher")
    a = procs.start("exec-a")
    b = procs.start("exec-b")
    async with running_api(settings) as api:
        job = await api.create(
            name="logrotate",
            cron_expression="* * * * * *",
            concurrency_policy="allow",
            hosts={},
            payload={"action": "noop"},
        )

    async def completed_on(hosts: set[str], after: datetime) -> datetime | None:
        for tick, runs in sorted((await _hosts_by_tick(pg_pool, job["id"])).items()):
            done = {h for h, (state, node) in runs.items() if state == "completed" and node == h}
            if tick > after and set(runs) == hosts and done == hosts:
                return tick
        return None

    start = datetime.now(UTC) - timedelta(seconds=1)
    await wait_for(lambda: completed_on({a, b}, start), timeout=60, interval=0.3, what="a tick run on a and on b")

    procs.signal("exec-b", signal.SIGTERM)  # a clean stop: its presence goes at once
    procs.procs["exec-b"].wait(30)
    left = datetime.now(UTC)
    # Ticks written from then on leave b out (a tick is written at most about a second ahead).
    await wait_for(lambda: completed_on({a}, left + timedelta(seconds=2)), timeout=30, interval=0.3, what="a alone")
    for tick, runs in (await _hosts_by_tick(pg_pool, job["id"])).items():
        if tick > left + timedelta(seconds=2):
            assert set(runs) == {a}, (tick, runs)

    c = procs.start("exec-c")
    joined = datetime.now(UTC)
    await wait_for(lambda: completed_on({a, c}, joined), timeout=60, interval=0.3, what="a tick run on a and on c")
    rows = await pg_pool.fetch(
        "SELECT host, node_id FROM runs WHERE job_id = $1 AND state = 'completed' AND host <> ''", job["id"]
    )
    assert rows and all(r["host"] == r["node_id"] for r in rows)  # each run ran on its own host
    reasons = await pg_pool.fetch("SELECT DISTINCT skip_reason FROM runs WHERE job_id = $1 AND host = ''", job["id"])
    # Every tick's own row says its runs are its hosts' (no_host: written before any executor was up).
    assert {r["skip_reason"] for r in reasons} <= {"per_host", "no_host"}


@cronos.task("per_host.first_attempt_fails", replace=True)
async def first_attempt_fails(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    """Attempt 1 fails; its retry completes."""
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")


async def test_a_failed_host_run_is_retried_on_its_own_host(
    pg_pool: asyncpg.Pool,
    settings: Settings,
    procs: Procs,  # noqa: F811  (the imported fixture)
) -> None:
    """A job created through the API alone with `hosts: {}` and a retry: each host's first attempt
    fails and its retry completes on that same host, one run per (tick, attempt, host)."""
    procs.start("leader", "dispatcher")
    task = ("executor", "--import", "tests.cluster.test_every_host")
    hosts = {procs.start("exec-a", *task), procs.start("exec-b", *task)}
    async with running_api(settings) as api:
        job = await api.create(name="purge", cron_expression="*/2 * * * * *", concurrency_policy="allow",
                               max_retries=1, retry_backoff_s=0, hosts={},
                               payload={"action": "per_host.first_attempt_fails"})  # fmt: skip
        assert job["max_retries"] == 1

    async def retried_on_both() -> list[Any] | None:
        rows = await pg_pool.fetch(
            "SELECT scheduled_for, attempt, host, node_id, state FROM runs WHERE job_id = $1 AND host <> ''"
            " ORDER BY scheduled_for, host, attempt",
            job["id"],
        )
        by_tick: dict[datetime, list[Any]] = defaultdict(list)
        for r in rows:
            by_tick[r["scheduled_for"]].append(r)
        for runs in by_tick.values():
            done = {(r["host"], r["attempt"], r["state"]) for r in runs if r["node_id"] == r["host"]}
            if done == {(h, 1, "failed") for h in hosts} | {(h, 2, "completed") for h in hosts}:
                return rows
        return None

    rows = await wait_for(retried_on_both, timeout=60, interval=0.3, what="a tick failed and retried on both hosts")
    seen = [(r["scheduled_for"], r["attempt"], r["host"]) for r in rows]
    assert len(seen) == len(set(seen)), "one run per (tick, attempt, host)"
    assert all(r["node_id"] in (None, r["host"]) for r in rows), "each attempt on its own host"
