"""The workload the chaos tests and the soak run, readiness, the faults they share, the seeded
mix and the final check."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cronos.models import FAIL_EXECUTOR_LOST
from tests.cluster.checker import JobDef, Report, RunRow, check
from tests.cluster.faults import KINDS, Injected, PlannedFault, inject, measure_recovery, plan, recovery_bound_s
from tests.cluster.harness import Cluster
from tests.cluster.ledger import fetch_runs, insert_job, load, settle
from tests.cluster.node import Node
from tests.waiting import poll, wait_for

LONG_S = 3.0  # the long job's run time: past a lease, so executor faults hit it mid-run
GRACE_S = 30.0  # misfire grace of the workload's jobs


@dataclass(frozen=True, slots=True)
class Workload:
    probe: JobDef  # every second, a no-op: the heartbeat every recovery is measured on
    jobs: list[JobDef]


async def add_workload(cluster: Cluster, *, long: bool = True, http: bool = True, retry: bool = True) -> Workload:
    """Jobs that exercise each path: on-time no-ops, a long forbid job, http deliveries, retries."""
    dsn = cluster.dsn
    policy: dict[str, Any] = {"misfire_grace_s": GRACE_S, "timeout_s": 30.0}
    probe = await insert_job(dsn, "probe", "* * * * * *", payload={"action": "noop"}, **policy)
    jobs = [probe]
    if long:
        payload = {"action": "sleep", "seconds": LONG_S}
        jobs.append(
            await insert_job(
                dsn, "long", "*/2 * * * * *", payload=payload, max_retries=1, retry_backoff_s=0.5, **policy
            )
        )
    if http:
        hook = {"url": cluster.receiver.url("/hook"), "method": "POST", "timeout_s": 5}
        jobs.append(await insert_job(dsn, "hook", "* * * * * *", kind="http", payload=hook, **policy))
    if retry:
        payload = {"action": "sleep", "seconds": 0.5}
        jobs.append(
            await insert_job(
                dsn, "retrying", "*/3 * * * * *", payload=payload, max_retries=2, retry_backoff_s=0.5, **policy
            )
        )
    return Workload(probe, jobs)


# The shortest window verify() checks, so it always holds some ticks of every-second jobs.
MIN_WINDOW_S = 3.0


async def wait_ready(cluster: Cluster, workload: Workload, timeout: float = 30.0) -> datetime:
    """Wait for a leader, a completed probe run and, in a cluster with an API, the API answering
    /health; returns the start of the checked window."""

    async def ready() -> datetime | None:
        cluster.assert_alive()
        done = await fetch_runs(cluster.dsn, "job_id = $1 AND state = 'completed'", workload.probe.id)
        # The API may start listening after the first run ends (its process imports more).
        serving = not cluster.api or await asyncio.to_thread(cluster.health) == 200
        return max(r.scheduled_for for r in done) if done and serving and cluster.leader() is not None else None

    what = "a leader, a completed probe run" + (" and the API answering /health" if cluster.api else "")
    return await wait_for(ready, timeout=timeout, interval=0.1, what=what)


async def probe_started(cluster: Cluster, workload: Workload, since: datetime, timeout: float) -> RunRow | None:
    """Wait for a probe tick scheduled at or after `since` to start (the cluster has worked up to
    then); None if none has within `timeout`, for the caller to judge."""

    async def started() -> RunRow | None:
        rows = await fetch_runs(
            cluster.dsn, "job_id = $1 AND scheduled_for >= $2 AND started_at IS NOT NULL", workload.probe.id, since
        )
        return rows[0] if rows else None

    return await poll(started, timeout=timeout, interval=0.1)


def settle_timeout_s(cluster: Cluster) -> float:
    """How long open runs may take to end once faults stop: a long run, its lease, a retry; and
    a waiting run of the long job, which a fault's late start made wait for its predecessor (up
    to its misfire grace: then it runs, or ends expired)."""
    return GRACE_S + LONG_S + 3 * cluster.lease_s + cluster.ttl_ms / 1000 + 5.0


async def verify(
    cluster: Cluster,
    workload: Workload,
    start: datetime,
    end: datetime | None = None,
    spanning: datetime | None = None,
) -> Report:
    """Settle the window (start, end], load the ledger and check every invariant.

    Without an `end`, the window ends 2 s ago but spans at least MIN_WINDOW_S and reaches
    `spanning` (a fault's recovery): a fault that recovers within a second of the start must not
    leave an empty window to check. The check starts once a probe tick 2 s past the end has
    started, so every tick due in the window has been written.
    """
    if end is None:
        end = max(datetime.now(UTC) - timedelta(seconds=2), start + timedelta(seconds=MIN_WINDOW_S))
        end = max(end, spanning or end)
        await probe_started(cluster, workload, end + timedelta(seconds=2), settle_timeout_s(cluster))
    await settle(cluster.dsn, end, settle_timeout_s(cluster))
    deliveries = cluster.receiver.deliveries()  # before the ledger: each delivery's run is in it
    ledger = await load(cluster.dsn)
    return check(ledger.jobs, ledger.runs, ledger.leader_log, (start, end), deliveries, ledger.running)


async def assert_ok(cluster: Cluster, workload: Workload, start: datetime, spanning: datetime | None = None) -> Report:
    """Every invariant holds over the test's window (to `spanning` at least), and no node exited on its own."""
    report = await verify(cluster, workload, start, spanning=spanning)
    exits = cluster.unexpected_exits()
    assert report.ok and not exits, report.describe() + "\n" + "\n".join(exits)
    assert report.expected > 0
    return report


# --- the faults the chaos tests share ---


async def recovered(cluster: Cluster, workload: Workload, kind: str, down_s: float = 0.0) -> Injected:
    """Inject one fault of `kind` and wait for the probe to run again, within its bound (plus `down_s`)."""
    fault = await inject(cluster, PlannedFault(0, kind, 0), down_s=down_s)
    await measure_recovery(cluster, fault, workload.probe.id)
    assert fault.recovery_s is not None and fault.recovery_s <= fault.bound_s + down_s, fault
    return fault


async def current_epoch(cluster: Cluster) -> int:
    return max((await load(cluster.dsn)).leader_log)


async def next_epoch(cluster: Cluster, old_epoch: int, timeout: float) -> tuple[int, datetime]:
    """Wait for a leader elected after `old_epoch` (any node, the restarted victim too)."""

    async def elected() -> tuple[int, datetime] | None:
        log = (await load(cluster.dsn)).leader_log
        return (max(log), log[max(log)]) if max(log) > old_epoch else None

    return await wait_for(elected, timeout=timeout, interval=0.05, what=f"a leader elected after epoch {old_epoch}")


async def long_run_in_flight(cluster: Cluster, workload: Workload, timeout: float = 15.0) -> RunRow:
    """Wait for a run of the long job that has just started (so it is mid-run for a while)."""

    async def just_started() -> RunRow | None:
        rows = await fetch_runs(
            cluster.dsn,
            "job_id = $1 AND state = 'running' AND started_at > now() - interval '1 s'",
            workload.jobs[1].id,
        )
        return rows[0] if rows else None

    return await wait_for(just_started, timeout=timeout, interval=0.05, what="a run of the long job to start")


async def wait_run(cluster: Cluster, run_id: int, timeout: float) -> RunRow:
    """The run once it has ended, or as it is after `timeout` (the caller's asserts say what is wrong)."""

    async def ended() -> RunRow | None:
        (row,) = await fetch_runs(cluster.dsn, "id = $1", run_id)
        return row if row.finished_at is not None else None

    if (row := await poll(ended, timeout=timeout, interval=0.05)) is not None:
        return row
    (row,) = await fetch_runs(cluster.dsn, "id = $1", run_id)
    return row


@dataclass(frozen=True, slots=True)
class LostRun:
    victim: Node
    run: RunRow  # as the leader's reaper ended it
    bound_s: float


async def lose_a_long_run(cluster: Cluster, workload: Workload, kind: str) -> LostRun:
    """`kind` (kill_executor, pause_executor) hits the executor of a long run mid-run: the run
    must end as executor lost within the fault's bound. A paused victim is left paused."""
    victim_run = await long_run_in_flight(cluster, workload)
    victim = cluster.nodes[victim_run.node_id or ""]
    hit = {"kill_executor": cluster.kill, "pause_executor": cluster.pause}[kind]
    at = hit(victim)
    bound = recovery_bound_s(kind, cluster.ttl_ms, cluster.lease_s)
    row = await wait_run(cluster, victim_run.id, bound)
    assert row.state == "failed" and FAIL_EXECUTOR_LOST in (row.error or ""), row
    assert row.finished_at is not None
    assert (row.finished_at - datetime.fromtimestamp(at, UTC)).total_seconds() <= bound
    return LostRun(victim, row, bound)


@dataclass(slots=True)
class MixResult:
    seed: int
    faults: list[Injected] = field(default_factory=list)
    report: Report | None = None

    def late(self) -> list[Injected]:
        return [f for f in self.faults if f.recovery_s is None or f.recovery_s > f.bound_s]


async def run_mix(
    cluster: Cluster,
    workload: Workload,
    seed: int,
    duration_s: float,
    progress: Callable[[Injected], None] | None = None,
    kinds: tuple[str, ...] = KINDS,
    supervise: bool = False,
) -> MixResult:
    """Inject the seed's plan of faults for `duration_s` seconds, measuring each recovery.

    `supervise` restarts nodes that exit on their own (as Kubernetes would), so a long soak
    goes on past such a crash; the crash is still recorded (cluster.crashes) and reported.
    """
    result = MixResult(seed)
    began = time.monotonic()
    async with asyncio.TaskGroup() as group:
        supervisor = group.create_task(_supervise(cluster)) if supervise else None
        for planned in plan(seed, duration_s, kinds):
            wait = planned.at_s - (time.monotonic() - began)
            if wait > 0:
                await asyncio.sleep(wait)
            injected = await inject(cluster, planned)
            await measure_recovery(cluster, injected, workload.probe.id)
            result.faults.append(injected)
            if progress is not None:
                progress(injected)
        rest = duration_s - (time.monotonic() - began)
        if rest > 0:
            await asyncio.sleep(rest)
        if supervisor is not None:
            supervisor.cancel()
    return result


async def _supervise(cluster: Cluster) -> None:
    while True:
        cluster.revive()
        await asyncio.sleep(0.5)
