"""One fault per test against a cluster of real processes, then the invariant checker.

Each test asserts a recovery bound derived from the cluster's ttl and lease (faults.py)
and that the ledger over the test's window satisfies G1-G5 (checker.py).
Seeded mix: CRONOS_CHAOS_SEED (default 1) and CRONOS_CHAOS_SECONDS (default 34: every kind of fault once for seed 1).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis

from cronos.models import SKIP_MISFIRED
from tests.cluster.checker import RunRow
from tests.cluster.faults import recovery_bound_s
from tests.cluster.harness import Cluster
from tests.cluster.ledger import fetch_runs, insert_job, load
from tests.cluster.scenario import (
    LONG_S,
    Workload,
    add_workload,
    assert_ok,
    current_epoch,
    long_run_in_flight,
    lose_a_long_run,
    next_epoch,
    recovered,
    run_mix,
    verify,
    wait_ready,
    wait_run,
)
from tests.waiting import wait_for

# A backstop above the sum of a test's own deadlines (readiness, recovery bound, settling), which
# fail first with a better message; single-fault tests take 6-12 s on a 2-core box.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(90)]

MIX_SEED = int(os.environ.get("CRONOS_CHAOS_SEED", "1"))
MIX_SECONDS = float(os.environ.get("CRONOS_CHAOS_SECONDS", "34"))

MakeCluster = Callable[..., Cluster]


async def test_kill_9_of_the_leader_fails_over_within_ttl(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, long=False, retry=False)
    start = await wait_ready(cluster, workload)
    old_epoch = await current_epoch(cluster)
    fault = await recovered(cluster, workload, "kill_leader")  # kill -9, then start it again
    _, elected = await next_epoch(cluster, old_epoch, fault.bound_s + 1)
    assert (elected - datetime.fromtimestamp(fault.started, UTC)).total_seconds() <= fault.bound_s
    await assert_ok(cluster, workload, start, spanning=fault.recovered_at)


async def test_sigstop_of_the_leader_past_its_ttl_cannot_write(make_cluster: MakeCluster) -> None:
    """G5: the paused leader wakes up believing it leads; fencing stops every write it tries."""
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, long=False, retry=False)
    start = await wait_ready(cluster, workload)
    old = cluster.leader()
    assert old is not None
    old_epoch = await current_epoch(cluster)
    stepped_down = old.events().count("leader.lost")
    fault = await recovered(cluster, workload, "pause_leader")  # SIGSTOP 2 x ttl, then SIGCONT

    async def noticed() -> bool:  # the woken leader ran its loop: it must notice and step down
        return old.events().count("leader.lost") > stepped_down

    await wait_for(noticed, timeout=fault.bound_s, interval=0.05, what=f"{old.name} stepping down once woken")
    leader = cluster.leader()
    assert leader is not None and leader is not old, "the paused leader took the lock back"
    ledger = await load(cluster.dsn)
    successor_began = ledger.leader_log[old_epoch + 1]
    late = [r for r in ledger.runs if r.epoch == old_epoch and r.created_at >= successor_began]
    assert not late, f"epoch {old_epoch} wrote after its successor began: {late}"
    await assert_ok(cluster, workload, start, spanning=fault.recovered_at)


async def test_kill_9_of_an_executor_mid_run_is_reaped_and_retried(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, http=False, retry=False)
    start = await wait_ready(cluster, workload)
    lost = await lose_a_long_run(cluster, workload, "kill_executor")
    cluster.restart(lost.victim)
    # The retry waits behind the long job's running run; the end that wakes it lets it be pushed
    # again, and the next tick's run, due at that instant, may be claimed first (forbid orders
    # waiting runs, not a woken run against a new tick): one run of LONG_S more, then the retry's.
    retry = await _retry_of(cluster, lost.run, 2 * LONG_S + lost.bound_s)
    # Retried per policy: attempt 2 ran, or (forbid) was skipped because a newer tick was running.
    assert retry.state == "completed" or (retry.state == "skipped" and retry.skip_reason), retry
    await assert_ok(cluster, workload, start)


async def _retry_of(cluster: Cluster, row: RunRow, timeout: float) -> RunRow:
    async def ended() -> RunRow | None:
        found = await fetch_runs(
            cluster.dsn,
            "job_id = $1 AND scheduled_for = $2 AND attempt = $3",
            row.job_id,
            row.scheduled_for,
            row.attempt + 1,
        )
        return found[0] if found and found[0].finished_at is not None else None

    return await wait_for(ended, timeout=timeout, interval=0.1, what=f"the retry of run {row.id} to end")


async def _holds_the_next_tick(cluster: Cluster, workload: Workload) -> datetime:
    """A tick of the probe that the executor holds (token read, tick lock taken) and has not
    started yet: it is waiting for the instant. Moves on to the next tick if one is missed."""
    tick = datetime.fromtimestamp(int(time.time()) + 2, UTC)
    assert cluster.redis_server is not None
    client = aioredis.Redis(port=cluster.redis_server.port)

    async def held() -> datetime | None:
        nonlocal tick
        lock = cluster.keys.tick_lock(workload.probe.id, int(tick.timestamp() * 1000), 1)
        locked = await client.exists(lock)  # first: the lock outlives the run's start
        rows = await fetch_runs(cluster.dsn, "job_id = $1 AND scheduled_for = $2", workload.probe.id, tick)
        if rows and rows[0].started_at is not None:
            tick += timedelta(seconds=1)  # too late for this one (a busy box): aim at the next
            return None
        return tick if locked else None

    try:
        return await wait_for(held, timeout=10, interval=0.02, what="the executor to hold a tick before it is due")
    finally:
        await client.aclose()


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
    tick = await _holds_the_next_tick(cluster, workload)
    executor = cluster.nodes["e1"]
    cluster.kill(executor)
    if not same_id:
        executor.env["CRONOS_NODE_ID"] = "e1-reborn"
    cluster.restart(executor)
    bound = recovery_bound_s("kill_executor", cluster.ttl_ms, cluster.lease_s)

    async def started() -> RunRow | None:
        rows = await fetch_runs(cluster.dsn, "job_id = $1 AND scheduled_for = $2", workload.probe.id, tick)
        return rows[0] if rows and rows[0].started_at is not None else None

    row = await wait_for(started, timeout=bound + 1, interval=0.1, what=f"tick {tick.isoformat()} to run")
    assert row.started_at is not None and (row.started_at - tick).total_seconds() <= bound, row
    # a few more ticks, so the checked window spans the fault
    await assert_ok(cluster, workload, start, spanning=row.started_at + timedelta(seconds=1))


async def test_sigstop_of_an_executor_past_its_lease_loses_the_run_and_reports_nothing(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(dispatchers=2, executors=2)
    workload = await add_workload(cluster, http=False, retry=False)
    start = await wait_ready(cluster, workload)
    lost = await lose_a_long_run(cluster, workload, "pause_executor")
    cluster.resume(lost.victim)

    async def gave_up() -> bool:  # the run's own step 5 (not the heartbeat) decided to report nothing
        return any(
            r.get("event") == "run.lost" and r.get("run_id") == lost.run.id and r.get("logger") == "cronos.executor"
            for r in lost.victim.records()
        )

    await wait_for(gave_up, timeout=LONG_S + lost.bound_s, what=f"{lost.victim.name} to give up run {lost.run.id}")
    (after,) = await fetch_runs(cluster.dsn, "id = $1", lost.run.id)
    assert after == lost.run, f"the woken executor rewrote a run it had lost: {lost.run} -> {after}"
    assert lost.victim.alive
    await assert_ok(cluster, workload, start)


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
    await long_run_in_flight(cluster, workload)
    fault = await recovered(cluster, workload, "redis_restart", down_s=3.0)
    await assert_ok(cluster, workload, start, spanning=fault.recovered_at)
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
    live = await long_run_in_flight(cluster, workload)
    fault = await recovered(cluster, workload, kind)
    # The run that was live through the outage was not reaped by mistake: its executor was alive.
    row = await wait_run(cluster, live.id, LONG_S + fault.bound_s)
    assert row.state == "completed", f"a live run was ended by the outage: {row}"
    await assert_ok(cluster, workload, start, spanning=fault.recovered_at)


@pytest.mark.timeout(MIX_SECONDS + 90)
async def test_seeded_random_mix_of_faults(make_cluster: MakeCluster) -> None:
    seed, seconds = MIX_SEED, MIX_SECONDS
    cluster = make_cluster(dispatchers=3, executors=3, api=True)
    workload = await add_workload(cluster)
    start = await wait_ready(cluster, workload)
    result = await run_mix(cluster, workload, seed, seconds)
    assert result.faults, "the plan injected nothing"
    report = await verify(cluster, workload, start)
    exits = "\n".join(cluster.unexpected_exits())
    timeline = "\n".join(f"{f.kind} {f.target}: {f.recovery_s} s (bound {f.bound_s:.1f})" for f in result.faults)
    assert not result.late() and report.ok and not exits, f"seed {seed}:\n{timeline}\n{report.describe()}\n{exits}"
    assert cluster.health() == 200
