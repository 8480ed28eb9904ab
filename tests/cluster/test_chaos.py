"""One fault per test against a cluster of real processes, then the invariant checker.

Each test asserts a recovery bound derived from the cluster's ttl and lease (faults.py)
and that the ledger over the test's window satisfies G1-G5 (checker.py).
Seeded mix: CRONOS_CHAOS_SEED (default 1) and CRONOS_CHAOS_SECONDS (default 34: every kind of fault once for seed 1).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from cronos.models import FAIL_EXECUTOR_LOST, SKIP_MISFIRED
from tests.cluster.checker import Report, RunRow
from tests.cluster.faults import PlannedFault, inject, measure_recovery, recovery_bound_s
from tests.cluster.harness import Cluster
from tests.cluster.ledger import fetch_runs, insert_job, load
from tests.cluster.scenario import LONG_S, add_workload, run_mix, verify, wait_ready

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(150)]

MakeCluster = Callable[..., Cluster]


async def assert_ok(cluster: Cluster, start: datetime) -> Report:
    """Every invariant holds over the test's window, and no node exited on its own."""
    report = await verify(cluster, start)
    exits = cluster.unexpected_exits()
    assert report.ok and not exits, report.describe() + "\n" + "\n".join(exits)
    assert report.expected > 0
    return report


async def long_run_in_flight(cluster: Cluster, job_id: int, timeout: float = 15.0) -> RunRow:
    """Wait for a run of the long job that has just started (so it is mid-run for a while)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = await fetch_runs(
            cluster.dsn, "job_id = $1 AND state = 'running' AND started_at > now() - interval '1 s'", job_id
        )
        if rows:
            return rows[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no run of job {job_id} started within {timeout}s")


async def wait_run(cluster: Cluster, run_id: int, timeout: float) -> RunRow:
    deadline = time.monotonic() + timeout
    while True:
        (row,) = await fetch_runs(cluster.dsn, "id = $1", run_id)
        if row.finished_at is not None or time.monotonic() > deadline:
            return row
        await asyncio.sleep(0.05)


async def next_epoch(cluster: Cluster, old_epoch: int, timeout: float) -> tuple[int, datetime]:
    """Wait for a leader elected after `old_epoch` (any node, the restarted victim too)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = (await load(cluster.dsn)).leader_log
        if max(log) > old_epoch:
            return max(log), log[max(log)]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no leader elected after epoch {old_epoch} within {timeout:.1f}s")


async def current_epoch(cluster: Cluster) -> int:
    return max((await load(cluster.dsn)).leader_log)


async def test_kill_9_of_the_leader_fails_over_within_ttl(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, long=False, retry=False)
    start = await wait_ready(cluster, workload)
    old_epoch = await current_epoch(cluster)
    fault = await inject(cluster, PlannedFault(0, "kill_leader", 0))  # kill -9, then start it again
    _, elected = await next_epoch(cluster, old_epoch, fault.bound_s + 1)
    assert (elected - datetime.fromtimestamp(fault.started, UTC)).total_seconds() <= fault.bound_s
    await measure_recovery(cluster, fault, workload.probe.id)
    assert fault.recovery_s is not None and fault.recovery_s <= fault.bound_s, fault
    await asyncio.sleep(2)
    await assert_ok(cluster, start)


async def test_sigstop_of_the_leader_past_its_ttl_cannot_write(make_cluster: MakeCluster) -> None:
    """G5: the paused leader wakes up believing it leads; fencing stops every write it tries."""
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, long=False, retry=False)
    start = await wait_ready(cluster, workload)
    old = cluster.leader()
    assert old is not None
    old_epoch = await current_epoch(cluster)
    fault = await inject(cluster, PlannedFault(0, "pause_leader", 0))  # SIGSTOP 2 x ttl, then SIGCONT
    await measure_recovery(cluster, fault, workload.probe.id)
    assert fault.recovery_s is not None and fault.recovery_s <= fault.bound_s, fault
    await asyncio.sleep(2)  # the woken leader runs its loop: it must notice and step down
    leader = cluster.leader()
    assert leader is not None and leader is not old, "the paused leader took the lock back"
    ledger = await load(cluster.dsn)
    successor_began = ledger.leader_log[old_epoch + 1]
    late = [r for r in ledger.runs if r.epoch == old_epoch and r.created_at >= successor_began]
    assert not late, f"epoch {old_epoch} wrote after its successor began: {late}"
    await assert_ok(cluster, start)


async def test_kill_9_of_an_executor_mid_run_is_reaped_and_retried(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, http=False, retry=False)
    start = await wait_ready(cluster, workload)
    long_job = workload.jobs[1]
    victim_run = await long_run_in_flight(cluster, long_job.id)
    victim = cluster.nodes[victim_run.node_id or ""]
    killed_at = cluster.kill(victim)
    bound = recovery_bound_s("kill_executor", cluster.ttl_ms, cluster.lease_s)
    row = await wait_run(cluster, victim_run.id, bound)
    assert row.state == "failed" and FAIL_EXECUTOR_LOST in (row.error or ""), row
    assert row.finished_at is not None
    assert (row.finished_at - datetime.fromtimestamp(killed_at, UTC)).total_seconds() <= bound
    cluster.restart(victim)
    retry = await _retry_of(cluster, row, LONG_S + bound)
    # Retried per policy: attempt 2 ran, or (forbid) was skipped because a newer tick was running.
    assert retry.state == "completed" or (retry.state == "skipped" and retry.skip_reason), retry
    await assert_ok(cluster, start)


async def _retry_of(cluster: Cluster, row: RunRow, timeout: float) -> RunRow:
    deadline = time.monotonic() + timeout
    while True:
        found = await fetch_runs(
            cluster.dsn,
            "job_id = $1 AND scheduled_for = $2 AND attempt = $3",
            row.job_id,
            row.scheduled_for,
            row.attempt + 1,
        )
        if (found and found[0].finished_at is not None) or time.monotonic() > deadline:
            assert found, f"run {row.id} was not retried"
            return found[0]
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("same_id", [True, False], ids=["same-node-id", "new-node-id"])
async def test_kill_9_of_an_executor_holding_a_token_before_its_tick_does_not_lose_the_tick(
    make_cluster: MakeCluster, same_id: bool
) -> None:
    """kill -9 just before a tick, while the executor holds the token pushed ahead and its tick lock.

    The executor is restarted at once, under the same node id (a StatefulSet pod, a compose
    container: same hostname, PID 1) or a new one (F7). The tick must still run within the
    lease bounds: re-entered by the same id, or taken over from the dead consumer.
    """
    cluster = make_cluster(dispatchers=1, executors=1)
    workload = await add_workload(cluster, long=False, http=False, retry=False)
    start = await wait_ready(cluster, workload)
    tick_s = int(time.time()) + 2
    await asyncio.sleep(tick_s - 0.1 - time.time())
    executor = cluster.nodes["e1"]
    cluster.kill(executor)
    if not same_id:
        executor.env["CRONOS_NODE_ID"] = "e1-reborn"
    cluster.restart(executor)
    tick = datetime.fromtimestamp(tick_s, UTC)
    bound = recovery_bound_s("kill_executor", cluster.ttl_ms, cluster.lease_s)
    deadline = time.monotonic() + bound + 1
    rows: list[RunRow] = []
    while time.monotonic() < deadline:
        rows = await fetch_runs(cluster.dsn, "job_id = $1 AND scheduled_for = $2", workload.probe.id, tick)
        if rows and rows[0].started_at is not None:
            break
        await asyncio.sleep(0.1)
    assert rows and rows[0].started_at is not None, f"tick {tick.isoformat()} did not run within {bound:.1f}s: {rows}"
    assert (rows[0].started_at - tick).total_seconds() <= bound, rows[0]
    await asyncio.sleep(3)  # a few more ticks, so the checked window spans the fault
    await assert_ok(cluster, start)


async def test_sigstop_of_an_executor_past_its_lease_loses_the_run_and_reports_nothing(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, http=False, retry=False)
    start = await wait_ready(cluster, workload)
    victim_run = await long_run_in_flight(cluster, workload.jobs[1].id)
    victim = cluster.nodes[victim_run.node_id or ""]
    paused_at = cluster.pause(victim)
    bound = recovery_bound_s("pause_executor", cluster.ttl_ms, cluster.lease_s)
    row = await wait_run(cluster, victim_run.id, bound)
    assert row.state == "failed" and FAIL_EXECUTOR_LOST in (row.error or ""), row
    assert row.finished_at is not None
    assert (row.finished_at - datetime.fromtimestamp(paused_at, UTC)).total_seconds() <= bound
    cluster.resume(victim)
    await asyncio.sleep(LONG_S + 1)  # its sleep would have ended by now: it must report nothing
    (after,) = await fetch_runs(cluster.dsn, "id = $1", victim_run.id)
    assert after == row, f"the woken executor rewrote a run it had lost: {row} -> {after}"
    assert victim.alive
    await assert_ok(cluster, start)


async def test_redis_restart_losing_all_data_recovers_per_misfire_policy(make_cluster: MakeCluster) -> None:
    """Redis down 3 s, back empty: queued runs are re-pushed, the ticks of the outage end per policy."""
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, retry=False)
    noop = {"action": "noop"}
    strict = await insert_job(
        cluster.dsn, "strict", "* * * * * *", payload=noop, misfire_policy="skip", misfire_grace_s=1
    )
    eager = await insert_job(
        cluster.dsn, "eager", "* * * * * *", payload=noop, misfire_policy="run_all", concurrency_policy="allow"
    )
    start = await wait_ready(cluster, workload)
    await long_run_in_flight(cluster, workload.jobs[1].id)
    down_s = 3.0
    fault = await inject(cluster, PlannedFault(0, "redis_restart", 0), down_s=down_s)
    await measure_recovery(cluster, fault, workload.probe.id)
    assert fault.recovery_s is not None and fault.recovery_s <= fault.bound_s + down_s, fault
    await asyncio.sleep(2)
    await assert_ok(cluster, start)
    outage = "job_id = $1 AND scheduled_for > $2 AND scheduled_for <= $3 AND attempt = 1"
    began, ended = datetime.fromtimestamp(fault.started, UTC), datetime.fromtimestamp(fault.ended, UTC)
    strict_rows = await fetch_runs(cluster.dsn, outage, strict.id, began, ended)
    eager_rows = await fetch_runs(cluster.dsn, outage, eager.id, began, ended)
    assert any(r.skip_reason == SKIP_MISFIRED for r in strict_rows), f"skip policy, nothing misfired: {strict_rows}"
    assert eager_rows and all(r.state == "completed" for r in eager_rows), f"run_all lost a tick: {eager_rows}"


@pytest.mark.parametrize("kind", ["pg_restart", "pg_crash"])
async def test_postgresql_restart_and_crash_lose_and_double_nothing(make_cluster: MakeCluster, kind: str) -> None:
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, retry=False)
    start = await wait_ready(cluster, workload)
    live = await long_run_in_flight(cluster, workload.jobs[1].id)
    fault = await inject(cluster, PlannedFault(0, kind, 0))
    await measure_recovery(cluster, fault, workload.probe.id)
    assert fault.recovery_s is not None and fault.recovery_s <= fault.bound_s, fault
    # The run that was live through the outage was not reaped by mistake: its executor was alive.
    row = await wait_run(cluster, live.id, LONG_S + fault.bound_s)
    assert row.state == "completed", f"a live run was ended by the outage: {row}"
    await asyncio.sleep(2)
    await assert_ok(cluster, start)


async def test_seeded_random_mix_of_faults(make_cluster: MakeCluster) -> None:
    seed = int(os.environ.get("CRONOS_CHAOS_SEED", "1"))
    seconds = float(os.environ.get("CRONOS_CHAOS_SECONDS", "34"))
    cluster = make_cluster(dispatchers=3, executors=3, api=True)
    workload = await add_workload(cluster)
    start = await wait_ready(cluster, workload)
    result = await run_mix(cluster, workload, seed, seconds)
    assert result.faults, "the plan injected nothing"
    report = await verify(cluster, start)
    exits = "\n".join(cluster.unexpected_exits())
    timeline = "\n".join(f"{f.kind} {f.target}: {f.recovery_s} s (bound {f.bound_s:.1f})" for f in result.faults)
    assert not result.late() and report.ok and not exits, f"seed {seed}:\n{timeline}\n{report.describe()}\n{exits}"
    assert cluster.health() == 200
