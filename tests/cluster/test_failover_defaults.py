"""A leader failover at default settings loses no tick (G7), and a forbid job's catch-up
after it is ordered, not raced into "previous run still running" skips (issue 14)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tests.cluster.harness import Cluster
from tests.cluster.ledger import insert_job, load
from tests.cluster.scenario import Workload, assert_ok, current_epoch, next_epoch, recovered, wait_ready

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

MakeCluster = Callable[..., Cluster]

# The production defaults (the harness shortens them for the chaos suite).
DEFAULTS = {"ttl_ms": 5000, "lease_s": 10.0, "drain_s": 30.0}
DEFAULT_ENV = {"CRONOS_LEADER_DB_TIMEOUT_MS": "2000", "CRONOS_RESYNC_INTERVAL_S": "30"}


async def test_a_leader_kill_9_at_defaults_loses_no_tick_and_skips_none(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(dispatchers=2, executors=2, extra_env=DEFAULT_ENV, **DEFAULTS)
    # Ten every-second jobs with every policy at its default (forbid, run_once, 60 s grace), half
    # of them taking 50 ms: their catch-up runs must not overlap and skip one another.
    jobs = [
        await insert_job(
            cluster.dsn, f"every-second-{i}", "* * * * * *", payload={"action": "sleep", "seconds": 0.05 * (i % 2)}
        )
        for i in range(10)
    ]
    workload = Workload(probe=jobs[0], jobs=jobs)
    start = await wait_ready(cluster, workload)
    old_epoch = await current_epoch(cluster)
    fault = await recovered(cluster, workload, "kill_leader")
    _, elected = await next_epoch(cluster, old_epoch, fault.bound_s + 1)
    report = await assert_ok(cluster, workload, start, spanning=fault.recovered_at)

    ledger = await load(cluster.dsn)
    started = datetime.fromtimestamp(fault.started, UTC)
    window = [r for r in ledger.runs if start < r.scheduled_for <= report.window[1]]
    by_job: dict[int, list[str]] = defaultdict(list)
    for run in window:
        by_job[run.job_id].append(run.state if run.state != "skipped" else f"skipped: {run.skip_reason}")
    skipped = {job: [s for s in states if s.startswith("skipped")] for job, states in by_job.items()}
    assert not any(skipped.values()), f"ticks lost to the failover: {skipped}"
    caught_up = [r for r in window if started <= r.scheduled_for < elected]
    assert caught_up, "the failover left a gap the new leader had to catch up"
    assert all(r.state == "completed" for r in caught_up), [r for r in caught_up if r.state != "completed"]
