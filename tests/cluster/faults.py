"""The faults: a seeded plan (pure), their injection into a Cluster, and recovery bounds.

A plan is a function of (seed, duration) only, so a failing mix is replayed exactly by its
seed. Faults run one at a time: inject, wait for recovery (bounded), then the next gap,
so every recovery time belongs to one fault.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cronos.models import FAIL_EXECUTOR_LOST
from tests.cluster.harness import Cluster
from tests.cluster.ledger import fetch_runs
from tests.cluster.node import Node
from tests.waiting import poll

KINDS = ("kill_leader", "pause_leader", "kill_executor", "pause_executor", "redis_restart", "pg_restart", "pg_crash")
# Graceful restarts (SIGTERM, then start), as in a rolling deploy: the soak adds them.
ROLLING = ("restart_leader", "restart_executor")
# One node's link to one backend dropped silently (tests/cluster/proxy.py), then healed: the soak
# adds them (its cluster routes every node through proxies; the chaos mix's does not).
PARTITIONS = ("partition_leader_pg", "partition_leader_redis", "partition_executor_pg", "partition_executor_redis")

# A tick every second, executor pickup, and scheduling noise of processes on a 2-core box.
SLACK_S = 3.0
PG_DOWN_S = 0.5  # downtime of a crashed PostgreSQL before it is started again
RECONNECT_S = 5.0  # worst reconnect backoff of a role after a backend comes back
WRITE_AHEAD_S = 1.0  # at least dispatcher.ticker.LOOKAHEAD_S (0.5 s): ticks a cut leader wrote before the cut


@dataclass(frozen=True, slots=True)
class PlannedFault:
    at_s: float  # offset from the start of the mix
    kind: str
    pick: int  # chooses the target among candidates, reproducibly


@dataclass(slots=True)
class Injected:
    kind: str
    target: str
    started: float  # wall clock
    ended: float = 0.0
    recovery_s: float | None = None  # None: did not recover within its bound
    bound_s: float = 0.0
    lost_runs: list[int] = field(default_factory=list)  # runs in flight on a faulted executor

    @property
    def recovered_at(self) -> datetime | None:
        return None if self.recovery_s is None else datetime.fromtimestamp(self.started + self.recovery_s, UTC)


def plan(
    seed: int, duration_s: float, kinds: tuple[str, ...] = KINDS, gap_s: tuple[float, float] = (3.0, 6.0)
) -> list[PlannedFault]:
    """Faults spread over `duration_s`; every kind appears once before any repeats (when time allows)."""
    rng = random.Random(seed)
    faults: list[PlannedFault] = []
    at = rng.uniform(*gap_s)
    bag: list[str] = []
    while at < duration_s:
        if not bag:
            bag = list(kinds)
            rng.shuffle(bag)
        faults.append(PlannedFault(round(at, 2), bag.pop(), rng.randrange(1 << 30)))
        at += rng.uniform(*gap_s)
    return faults


def recovery_bound_s(kind: str, ttl_ms: int, lease_s: float, drain_s: float = 2.0) -> float:
    """How long after its injection a fault may keep the cluster from running ticks."""
    ttl_s = ttl_ms / 1000
    return {
        # a clean stop releases the lock: the next candidate wins at its next try
        "restart_leader": ttl_s / 3 + SLACK_S,
        # the drain ends (or cancels and records) in-flight runs by its deadline
        "restart_executor": drain_s + SLACK_S,
        # the lock expires after ttl; a candidate retries every ttl/3
        "kill_leader": ttl_s + ttl_s / 3 + SLACK_S,
        "pause_leader": ttl_s + ttl_s / 3 + SLACK_S,
        # the run's lease expires, then a reaper pass (every lease/2 or so) ends it
        "kill_executor": lease_s * 2 + SLACK_S,
        "pause_executor": lease_s * 2 + SLACK_S,
        # the leader's renewal finds its key gone: step down, re-elect, re-push
        "redis_restart": ttl_s * 2 + SLACK_S,
        "pg_restart": RECONNECT_S + SLACK_S,
        "pg_crash": PG_DOWN_S + RECONNECT_S + SLACK_S,
        # the leader's ping or renewal fails within its db timeout (= ttl in the harness), or its
        # lock expires: another leads within ttl + slack (the bound)
        "partition_leader_pg": ttl_s + SLACK_S,
        "partition_leader_redis": ttl_s + SLACK_S,
        # the cut executor's runs are reaped after the lease; tokens it read are reclaimed
        "partition_executor_pg": lease_s * 2 + SLACK_S,
        "partition_executor_redis": lease_s * 2 + SLACK_S,
    }[kind]


def _pick(nodes: list[Node], pick: int) -> Node:
    return sorted(nodes, key=lambda n: n.name)[pick % len(nodes)]


async def _busy_executor(cluster: Cluster, pick: int) -> tuple[Node, list[int]]:
    """An executor with a run in flight if there is one (the interesting victim), with those runs."""
    running = await fetch_runs(cluster.dsn, "state = 'running'")
    alive = [n for n in cluster.role("executor") if n.alive and not n.paused]
    busy = [n for n in alive if any(r.node_id == n.name for r in running)]
    node = _pick(busy or alive, pick)
    return node, [r.id for r in running if r.node_id == node.name]


def _leader(cluster: Cluster, pick: int) -> Node:
    return cluster.leader() or _pick([n for n in cluster.role("dispatcher") if n.alive], pick)


async def inject(cluster: Cluster, fault: PlannedFault, down_s: float = 0.0) -> Injected:
    """Inject one fault and undo it (restart, SIGCONT) as an operator or supervisor would.

    `down_s`: how long redis-server stays down before it starts again, empty.
    """
    ttl_s, lease_s = cluster.ttl_ms / 1000, cluster.lease_s
    bound = recovery_bound_s(fault.kind, cluster.ttl_ms, lease_s, cluster.drain_s)
    if fault.kind == "kill_leader":
        node = _leader(cluster, fault.pick)
        done = Injected(fault.kind, node.name, cluster.kill(node), bound_s=bound)
        cluster.restart(node)  # back as a candidate, like a restarted container
    elif fault.kind == "pause_leader":
        node = _leader(cluster, fault.pick)
        done = Injected(fault.kind, node.name, cluster.pause(node), bound_s=bound)
        await asyncio.sleep(2 * ttl_s)
        cluster.resume(node)
    elif fault.kind == "kill_executor":
        node, lost = await _busy_executor(cluster, fault.pick)
        done = Injected(fault.kind, node.name, cluster.kill(node), bound_s=bound, lost_runs=lost)
        cluster.restart(node)
    elif fault.kind == "pause_executor":
        node, lost = await _busy_executor(cluster, fault.pick)
        done = Injected(fault.kind, node.name, cluster.pause(node), bound_s=bound, lost_runs=lost)
        await asyncio.sleep(2 * lease_s + 0.5)  # past its lease: the run is taken away
        cluster.resume(node)
    elif fault.kind in PARTITIONS:
        backend = "redis" if fault.kind.endswith("redis") else "postgresql"
        if fault.kind.startswith("partition_leader"):
            node, lost = _leader(cluster, fault.pick), []
            hold_s = 2 * ttl_s + SLACK_S  # past the takeover
        else:
            node, lost = await _busy_executor(cluster, fault.pick)
            hold_s = 2 * lease_s + 0.5
            if backend == "redis":
                lost = []  # its leases live in PostgreSQL: its runs complete, none is lost
        proxy = cluster.proxy(node, backend)
        proxy.drop()
        started = cluster.mark(f"drop {node.name} -> {backend}")
        done = Injected(fault.kind, node.name, started, bound_s=bound, lost_runs=lost)
        await asyncio.sleep(hold_s)
        proxy.heal()
        cluster.mark(f"heal {node.name} -> {backend}")
    elif fault.kind == "restart_leader":
        node = _leader(cluster, fault.pick)
        done = Injected(fault.kind, node.name, time.time(), bound_s=bound)
        await asyncio.to_thread(cluster.terminate, node)
        cluster.restart(node)
    elif fault.kind == "restart_executor":
        node, lost = await _busy_executor(cluster, fault.pick)
        done = Injected(fault.kind, node.name, time.time(), bound_s=bound, lost_runs=lost)
        await asyncio.to_thread(cluster.terminate, node)
        cluster.restart(node)
    elif fault.kind == "redis_restart":
        done = Injected(fault.kind, "redis", await asyncio.to_thread(cluster.redis_restart, down_s), bound_s=bound)
    elif fault.kind == "pg_restart":
        done = Injected(fault.kind, "postgresql", await asyncio.to_thread(cluster.pg_restart), bound_s=bound)
    elif fault.kind == "pg_crash":
        started = await asyncio.to_thread(cluster.pg_crash, PG_DOWN_S)
        done = Injected(fault.kind, "postgresql", started, bound_s=bound)
    else:
        raise ValueError(f"unknown fault {fault.kind!r}")
    done.ended = time.time()
    return done


async def measure_recovery(cluster: Cluster, fault: Injected, probe_job_id: int) -> Injected:
    """Wait (up to the bound, plus a margin to report by how much it was missed) for recovery.

    Executor faults: every run in flight on the victim has ended (reaped as executor lost,
    or finished before its lease ran out). Other faults: a tick of the every-second probe
    job scheduled after the fault has started.
    """
    since = datetime.fromtimestamp(fault.started, UTC)

    async def recovery_s() -> float | None:
        if fault.kind in ("kill_executor", "pause_executor", "restart_executor") or (
            fault.kind in PARTITIONS and fault.lost_runs
        ):
            rows = await fetch_runs(cluster.dsn, "id = ANY($1::bigint[])", fault.lost_runs or [-1])
            ends = [r.finished_at for r in rows if r.finished_at is not None]
            if len(ends) < len(rows):
                return None
            return max(((e - since).total_seconds() for e in ends), default=0.0)
        # A tick due after the fault is over: one pushed just before a Redis/PostgreSQL outage
        # may still start and would read as an instant "recovery".
        after = datetime.fromtimestamp(max(fault.started, fault.ended), UTC)
        if fault.kind in PARTITIONS:  # the cluster recovers while the link is still down: the first
            # tick the cut leader cannot have written ahead (the write-ahead is at most 1 s) tells
            after = datetime.fromtimestamp(fault.started + WRITE_AHEAD_S, UTC)
        rows = await fetch_runs(
            cluster.dsn, "job_id = $1 AND scheduled_for >= $2 AND started_at IS NOT NULL", probe_job_id, after
        )
        starts = [r.started_at for r in rows if r.started_at is not None]
        return (min(starts) - since).total_seconds() if starts else None

    async def measured() -> bool:
        fault.recovery_s = await recovery_s()
        return fault.recovery_s is not None

    await poll(measured, timeout=max(0.0, fault.started + fault.bound_s - time.time()) + 5.0, interval=0.1)
    return fault


def lost_reason_ok(error: str | None) -> bool:
    return bool(error) and FAIL_EXECUTOR_LOST in (error or "")
