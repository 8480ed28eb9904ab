"""Queues with real processes: a `cronos dispatcher`, an executor pool per queue (one chosen by
CRONOS_QUEUES, one by `--queue`), and a queue nobody serves. Each pool runs only its queue's
jobs; the unserved queue's runs wait, and /api/cluster and the leader's gauge show its lag."""

from __future__ import annotations

import aiohttp
import asyncpg
import pytest

from cronos.settings import Settings
from tests.cluster.servers import free_port
from tests.cluster.test_executor_process import Procs, procs  # noqa: F401  (the fixture)
from tests.integration.api_client import running_api
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster


async def _add_job(pool: asyncpg.Pool, name: str, queue: str) -> int:
    async with pool.acquire() as conn, conn.transaction():
        job_id = await conn.fetchval(
            "INSERT INTO jobs (name, cron_expression, payload, queue, last_scheduled_for) VALUES"
            " ($1, '* * * * * *', '{\"action\": \"noop\"}', $2, now()) RETURNING id",
            name,
            queue,
        )
        await conn.execute("SELECT pg_notify('cronos_jobs', $1)", f'{{"op": "created", "job_id": {job_id}}}')
    return int(job_id)


async def test_each_executor_pool_runs_only_its_queues_jobs_and_an_unserved_queue_shows_its_lag(
    pg_pool: asyncpg.Pool,
    settings: Settings,
    procs: Procs,  # noqa: F811  (the imported fixture)
) -> None:
    metrics_port = free_port()
    procs.start("leader", "dispatcher", CRONOS_METRICS_PORT=str(metrics_port))
    plain = procs.start("exec-default", "executor")  # CRONOS_QUEUES unset: `default`
    gpu = procs.start("exec-gpu", "executor", CRONOS_QUEUES="gpu,spare")
    both = procs.start("exec-cli", "executor", "--queue", "gpu", CRONOS_QUEUES="default")  # the flag wins
    jobs = {
        "default": await _add_job(pg_pool, "on default", "default"),
        "gpu": await _add_job(pg_pool, "on gpu", "gpu"),
        "edge": await _add_job(pg_pool, "on edge", "edge"),  # no executor serves `edge`
    }

    async def completed(job_id: int) -> int:
        return int(
            await pg_pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'completed'", job_id)
        )

    async def ran_enough() -> bool:
        return await completed(jobs["default"]) >= 4 and await completed(jobs["gpu"]) >= 4

    await wait_for(ran_enough, timeout=60, interval=0.2, what="4 runs completed on each served queue")

    nodes = {
        queue: {r["node_id"] for r in await pg_pool.fetch("SELECT node_id FROM runs WHERE job_id = $1", job_id)}
        for queue, job_id in jobs.items()
    }
    assert nodes["default"] <= {plain, None}, nodes  # None: queued, not claimed yet
    assert nodes["gpu"] <= {gpu, both, None}, nodes
    assert nodes["edge"] == {None}, nodes  # no executor claimed any of them
    edge_states = {r["state"] for r in await pg_pool.fetch("SELECT state FROM runs WHERE job_id = $1", jobs["edge"])}
    assert edge_states <= {"queued", "skipped"}, edge_states

    async with running_api(settings) as api:

        async def edge_lags() -> bool:
            reply = await api.call("GET", "/api/cluster")
            return (reply.body["queues"].get("edge") or {}).get("lag", 0) >= 3

        await wait_for(edge_lags, timeout=30, interval=0.5, what="the edge queue's lag in /api/cluster")
        body = (await api.call("GET", "/api/cluster")).body
    queues = body["queues"]
    assert set(queues) >= {"default", "gpu", "edge"}
    assert set(queues["edge"]["consumers"]) == set()  # nobody reads it
    assert set(queues["gpu"]["consumers"]) <= {gpu, both} and set(queues["default"]["consumers"]) <= {plain}
    assert body["stream"] == queues["default"]  # the field of old releases: the default queue
    served = {n["node_id"]: n["info"].get("queues") for n in body["nodes"] if n["role"] == "executor"}
    assert served == {plain: "default", gpu: "gpu,spare", both: "gpu"}

    async def gauge_shows_edge_lag() -> bool:
        async with aiohttp.ClientSession() as client, client.get(f"http://127.0.0.1:{metrics_port}/metrics") as reply:
            text = await reply.text()
        lines = [line for line in text.splitlines() if line.startswith('cronos_stream_lag{queue="edge"}')]
        return bool(lines) and float(lines[0].split()[-1]) >= 3

    await wait_for(gauge_shows_edge_lag, timeout=30, interval=0.5, what='cronos_stream_lag{queue="edge"} on the leader')
