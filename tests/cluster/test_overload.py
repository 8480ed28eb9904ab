"""A small overload on real processes (G8, issue 38): one executor whose every-second jobs each burn
20 ms of its loop's CPU, offered about 2x and then 4x what that loop can run. The runs that start
per second stay at the plateau (4x >= 90 % of 2x), the CPU per started run of the roles and
PostgreSQL stays within 1.2x of its value below capacity, every job gets runs (none starved), and no
job holds more than two overdue runs that have not started (the default policies: run_once,
forbid; one waits behind the running run). Before, each job's backlog grew by a run a second (every
tick queued): 6, 14 and 24 pending runs a job at the three loads, and jobs starved at 4x.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

import asyncpg
import pytest

from cronos.bench.common import proc_cpu_s
from cronos.bench.counter import task_payload
from tests.cluster.harness import Cluster
from tests.cluster.ledger import with_db
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(150)]

MakeCluster = Callable[..., Cluster]
BELOW, TWICE, FOUR = 10, 100, 200  # jobs: 0.2, 2 and 4 s of the loop's CPU a second
TASK = "cpu:20ms"
WARMUP_S, WINDOW_S = 4.0, 7.0

ADD_JOBS = """
WITH made AS (
    INSERT INTO jobs (name, cron_expression, payload)
    SELECT 'burn-' || g, '* * * * * *', $2::jsonb FROM generate_series($1::int + 1, $1::int + $3::int) g
    RETURNING id)
SELECT count(pg_notify('cronos_jobs', json_build_object('op', 'created', 'job_id', id)::text)) FROM made
"""
STARTED = "SELECT job_id, count(*) AS runs FROM runs WHERE started_at > $1 AND started_at <= $2 GROUP BY job_id"
MOST_PENDING = (
    "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM runs WHERE state IN ('queued', 'waiting')"
    " AND due_at < now() - interval '1 second' GROUP BY job_id) p"
)


class Cpu:
    """CPU seconds of the cluster's role processes and its PostgreSQL backends, from /proc."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._seen: dict[int, tuple[float, float]] = {}  # pid -> (first, last)

    async def sample(self, conn: asyncpg.Connection) -> None:
        pids = [n.proc.pid for n in self._cluster.nodes.values() if n.proc is not None]
        pids += [r["pid"] for r in await conn.fetch("SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()")]
        for pid in pids:
            if (cpu := proc_cpu_s(pid)) is not None:
                first = self._seen.get(pid, (cpu, cpu))[0]
                self._seen[pid] = (first, cpu)

    def total(self) -> float:
        return sum(last - first for first, last in self._seen.values())


async def _load(conn: asyncpg.Connection, cluster: Cluster, jobs: int) -> tuple[float, float, list[int], int]:
    """Runs started per second, CPU ms per started run, runs of each job and the most overdue
    pending runs of a job, over a window after the warm-up."""
    await asyncio.sleep(WARMUP_S)  # the load settling, not a wait for a condition
    cpu = Cpu(cluster)
    await cpu.sample(conn)
    start, began = datetime.now(UTC), time.monotonic()
    most_pending = 0
    while time.monotonic() - began < WINDOW_S:
        await asyncio.sleep(1.0)  # a measurement window, sampled every second
        await cpu.sample(conn)
        most_pending = max(most_pending, int(await conn.fetchval(MOST_PENDING)))
    end = datetime.now(UTC)
    per_job = {r["job_id"]: r["runs"] for r in await conn.fetch(STARTED, start, end)}
    counts = [per_job.get(job, 0) for job in range(1, jobs + 1)]
    started = sum(counts)
    return started / (end - start).total_seconds(), 1000 * cpu.total() / max(started, 1), counts, most_pending


@pytest.mark.xfail(
    reason="issue 38 open: a job still holds 3-4 overdue pending runs at 4x (bound 2): the ticks the leader"
    " queues before its pending run is LATE_START_S overdue (lifecycle.overdue_before). On a box at load"
    " 10-20 the plateau, CPU and fairness asserts held in one of two runs; in the other no run started in"
    " the 2x and 4x windows (100 running, 100 waiting: not explained yet)",
    strict=False,
)
async def test_a_small_overload_holds_the_plateau(make_cluster: MakeCluster) -> None:
    # The production leases (the harness shortens them for the chaos suite): a loop busy with runs
    # beats late, and a 1.5 s lease would take its runs away as lost.
    cluster = make_cluster(
        dispatchers=1,
        executors=1,
        executor_imports=("tests.cluster.tasks", "cronos.bench.counter"),
        ttl_ms=5000,
        lease_s=10.0,
        drain_s=30.0,
    )
    payload = json.dumps(task_payload(TASK))

    async def work(conn: asyncpg.Connection) -> str:
        await conn.execute(ADD_JOBS, 0, payload, BELOW)
        await wait_for(lambda: conn.fetchval("SELECT count(*) FROM runs WHERE state = 'completed'"), timeout=30)
        below = await _load(conn, cluster, BELOW)
        await conn.execute(ADD_JOBS, BELOW, payload, TWICE - BELOW)
        twice = await _load(conn, cluster, TWICE)
        await conn.execute(ADD_JOBS, TWICE, payload, FOUR - TWICE)
        four = await _load(conn, cluster, FOUR)
        cluster.assert_alive()

        figures = {"below": below, "2x": twice, "4x": four}
        states = await conn.fetch(
            "SELECT state, coalesce(skip_reason, left(error, 60)), count(*) FROM runs GROUP BY 1, 2 ORDER BY 3 DESC"
        )
        report = (
            "; ".join(
                f"{name}: {rate:.1f} runs/s, {cpu_ms:.1f} ms CPU/run, runs of a job min {min(c)} median"
                f" {statistics.median(c):g}, most pending {pending}"
                for name, (rate, cpu_ms, c, pending) in figures.items()
            )
            + f"; runs {[tuple(r) for r in states]}"
        )
        assert below[0] >= 0.7 * BELOW, f"not below capacity: {report}"  # a window's edges cut a run a job
        assert twice[0] < 0.9 * TWICE, f"not overloaded: {report}"
        assert four[0] >= 0.9 * twice[0], f"the runs/s fell off the plateau: {report}"
        assert four[1] <= 1.2 * below[1], f"the CPU per run grew: {report}"
        assert min(four[2]) >= 1, f"starved jobs: {report}"
        # One run waiting behind the job's running one, and the next tick's, queued before the one
        # waiting was overdue (lifecycle.overdue_before): two at most, whatever the load.
        assert max(twice[3], four[3]) <= 2, f"a job held a backlog: {report}"
        return report

    print(await with_db(cluster.dsn, work, timeout=140))
