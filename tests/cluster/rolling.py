"""A rolling restart of a Cluster, one node at a time, as a deploy does it: start the node's
replacement (a new node id, its own log), wait until it is up (a dispatcher beating as a
candidate, an executor serving), then SIGTERM the old node and wait for its graceful exit.

    step = await roll(cluster, cluster.nodes["d1"], "d3", drain_timeout_s=40)

Built from the harness's public pieces only (Node, Cluster.nodes, mark); every start and stop
is on the cluster's timeline. A replaced node stays in `cluster.nodes` (stopped, so its exit
is not a finding) and is closed with the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import redis.asyncio as aioredis

from tests.cluster.harness import Cluster
from tests.cluster.ledger import with_db
from tests.cluster.node import Node
from tests.cluster.servers import free_port
from tests.waiting import wait_for

# The event a role logs once it is up, before it beats its presence.
UP_EVENT = {"dispatcher": "dispatcher.candidate", "executor": "executor.ready", "api": "api.listening"}


@dataclass(frozen=True, slots=True)
class Election:
    epoch: int
    holder: str
    elected_at: datetime


@dataclass(slots=True)
class Step:
    """One node replaced: when each part happened (wall clock, unix time)."""

    role: str
    old: str
    new: str
    was_leader: bool  # the old node held the leader lock when it was sent SIGTERM
    started_at: float  # the replacement's process started
    up_at: float = 0.0  # ... and was up
    sigterm_at: float = 0.0
    exited_at: float = 0.0
    exit_code: int | None = None
    epoch_before: int = 0
    elected: Election | None = None  # the first leader elected after the SIGTERM (a leader's restart)

    @property
    def handover_s(self) -> float | None:
        """SIGTERM to the new leader's election (PostgreSQL's elected_at)."""
        if self.elected is None:
            return None
        return self.elected.elected_at.timestamp() - self.sigterm_at

    @property
    def sigterm_dt(self) -> datetime:
        return datetime.fromtimestamp(self.sigterm_at, UTC)

    @property
    def exited_dt(self) -> datetime:
        return datetime.fromtimestamp(self.exited_at, UTC)


def start_replacement(cluster: Cluster, old: Node, name: str) -> Node:
    """Start a node like `old` (same role, command and settings) under the node id `name`."""
    assert name not in cluster.nodes, f"{name} is already a node of the cluster"
    env = {**old.env, "CRONOS_NODE_ID": name}
    if old.role == "api":  # beside the old one, as behind a load balancer
        env["PORT"] = str(free_port())
    node = Node(old.role, name, list(old.argv), env, old.cwd, old.logfile.with_name(f"{name}.log"))
    cluster.nodes[name] = node
    node.start()
    cluster.mark(f"start {name} (replaces {old.name})")
    return node


async def presence(cluster: Cluster, role: str, name: str) -> dict[str, str]:
    """The node's presence hash in Redis (empty when it has not beaten yet)."""
    assert cluster.redis_server is not None
    client = aioredis.Redis(port=cluster.redis_server.port, socket_timeout=1, decode_responses=True)
    try:
        return dict(await client.hgetall(cluster.keys.node_heartbeat(role, name)))
    finally:
        await client.aclose()


async def wait_up(cluster: Cluster, node: Node, timeout: float = 30.0) -> float:
    """Wait until `node` is up: it logged its role's up event and beats its presence (a
    dispatcher beats after its first campaign, so it then stands by as a candidate; an
    executor's heartbeat starts with its consumer). Returns the wall-clock time."""

    async def up() -> bool:
        assert node.alive, f"{node.name} exited while starting:\n" + "\n".join(
            node.logfile.read_text(errors="replace").splitlines()[-20:]
        )
        if UP_EVENT[node.role] not in node.events():
            return False
        if node.role == "api":
            return await asyncio.to_thread(cluster.health, int(node.env["PORT"])) == 200
        return bool(await presence(cluster, node.role, node.name))

    await wait_for(up, timeout=timeout, interval=0.05, what=f"{node.name} to be up")
    if node.role == "api":
        cluster.api_port = int(node.env["PORT"])  # clients move to the new one
    return cluster.mark(f"{node.name} up")


async def stop(cluster: Cluster, node: Node, timeout: float) -> tuple[float, float, int | None]:
    """SIGTERM `node` and wait (up to `timeout`, then kill -9) for it to exit:
    (SIGTERM sent, exited, exit code)."""
    sent = cluster.mark(f"SIGTERM {node.name}")
    code = await asyncio.to_thread(node.terminate, timeout)
    return sent, cluster.mark(f"{node.name} exited (exit {code})"), code


async def elections(cluster: Cluster) -> list[Election]:
    """Every leader elected so far (leader_log), oldest first."""

    async def work(conn: asyncpg.Connection) -> list[Election]:
        rows = await conn.fetch("SELECT epoch, holder, elected_at FROM leader_log ORDER BY epoch")
        return [Election(r["epoch"], r["holder"] or "", r["elected_at"]) for r in rows]

    return await with_db(cluster.dsn, work)


async def election_after(cluster: Cluster, epoch: int, timeout: float) -> Election | None:
    """The first leader elected after `epoch`, waiting up to `timeout` for one (None: none was)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        later = [e for e in await elections(cluster) if e.epoch > epoch]
        if later or asyncio.get_running_loop().time() > deadline:
            return later[0] if later else None
        await asyncio.sleep(0.05)


async def roll(cluster: Cluster, old: Node, name: str, *, stop_timeout_s: float, up_timeout_s: float = 30.0) -> Step:
    """Replace `old` by a new node `name`: start it, wait until it is up, then SIGTERM `old` and
    wait for its exit. For a dispatcher that led, also wait for the next leader's election."""
    step = Step(old.role, old.name, name, was_leader=False, started_at=time.time())
    new = start_replacement(cluster, old, name)
    step.up_at = await wait_up(cluster, new, up_timeout_s)
    if old.role == "dispatcher":
        history = await elections(cluster)
        step.epoch_before = history[-1].epoch if history else 0
        leader = cluster.leader()
        step.was_leader = leader is not None and leader.name == old.name
    step.sigterm_at, step.exited_at, step.exit_code = await stop(cluster, old, stop_timeout_s)
    if step.was_leader:
        ttl_s = cluster.ttl_ms / 1000
        step.elected = await election_after(cluster, step.epoch_before, timeout=2 * ttl_s + 5)
    return step


def log_lines(node: Node, events: set[str], since: float, until: float) -> list[dict[str, Any]]:
    """`node`'s JSON log records of these events logged within [since, until] (unix time)."""
    found = []
    for record in node.records():
        if record.get("event") not in events:
            continue
        with contextlib.suppress(KeyError, ValueError, TypeError):
            at = datetime.fromisoformat(str(record["ts"])).timestamp()
            if since <= at <= until:
                found.append(record)
    return found
