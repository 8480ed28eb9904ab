"""The workload the chaos tests and the soak run, readiness, the seeded mix and the final check."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.cluster.checker import JobDef, Report, check
from tests.cluster.faults import KINDS, Injected, inject, measure_recovery, plan
from tests.cluster.harness import Cluster
from tests.cluster.ledger import fetch_runs, insert_job, load, settle

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
    """Wait for a leader and a completed probe run; returns the start of the checked window."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cluster.assert_alive()
        done = await fetch_runs(cluster.dsn, "job_id = $1 AND state = 'completed'", workload.probe.id)
        if done and cluster.leader() is not None:
            return max(r.scheduled_for for r in done)
        await asyncio.sleep(0.1)
    raise AssertionError(f"cluster not ready after {timeout}s (no leader or no completed probe run)")


def settle_timeout_s(cluster: Cluster) -> float:
    """How long open runs may take to end once faults stop: a long run, its lease, a retry."""
    return LONG_S + 3 * cluster.lease_s + cluster.ttl_ms / 1000 + 5.0


async def verify(cluster: Cluster, start: datetime, end: datetime | None = None) -> Report:
    """Settle the window (start, end], load the ledger and check every invariant.

    Without an `end`, the window ends 2 s ago but spans at least MIN_WINDOW_S: a fault that
    recovers within a second of the start must not leave an empty window to check.
    """
    if end is None:
        end = max(datetime.now(UTC) - timedelta(seconds=2), start + timedelta(seconds=MIN_WINDOW_S))
        await asyncio.sleep(max(0.0, (end + timedelta(seconds=2) - datetime.now(UTC)).total_seconds()))
    await settle(cluster.dsn, end, settle_timeout_s(cluster))
    deliveries = cluster.receiver.deliveries()  # before the ledger: each delivery's run is in it
    ledger = await load(cluster.dsn)
    return check(ledger.jobs, ledger.runs, ledger.leader_log, (start, end), deliveries, ledger.running)


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
