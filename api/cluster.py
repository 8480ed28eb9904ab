"""GET /api/cluster: the cluster's identity, the leader and its epoch, every node's heartbeat (an
executor's with its queues, task actions and share of the runs), each queue's stream backlog, and
the task actions whose runs no live executor of their queue serves (executor.routing).

Reads only. Each backend is asked separately, so the view still answers (with nulls)
when Redis or PostgreSQL is down, and says which.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from aiohttp import web

from api.backends import Backends
from api.bodies import respond
from api.routing import Route
from api.schemas import ClusterOut, LeaderHealthOut, LeaderOut, NodeOut, RunShareOut, StreamOut, UnservedOut
from api.state import BACKENDS
from cronos import presence
from cronos.errors import BackendUnavailable
from cronos.models import DEFAULT_QUEUE
from cronos.presence import nodes
from cronos.store.identity import database_id
from cronos.stream import RunStream

# Shown as fields of their own (structured), not in `info`.
_NODE_FIELDS = ("role", "node_id", "last_heartbeat", "actions", "shell", "unserved", *presence.RUN_FIELDS)


def shares(found: list[dict[str, str]], now_s: float) -> dict[str, RunShareOut]:
    """Each executor's runs over its window and its share of all executors' (by runs a second, so a
    node younger than the window is not shown short), by node id."""
    counts = {n.get("node_id", ""): c for n in found if n.get("role") == "executor" and (c := presence.runs_of(n))}
    total = sum(c.rate for c in counts.values())
    return {
        node: RunShareOut(
            window_s=round(c.recent_s, 1),
            started=c.recent,
            share_pct=round(100 * c.rate / total, 1) if total > 0 else None,
            started_total=c.started,
            last_claimed_at=None if c.claimed_at is None else datetime.fromtimestamp(c.claimed_at, UTC),
            last_claimed_age_s=None if c.claimed_at is None else round(max(0.0, now_s - c.claimed_at), 3),
        )
        for node, c in counts.items()
    }


def node_out(raw: dict[str, str], now_s: float, share: RunShareOut | None = None) -> NodeOut:
    try:
        beat = float(raw.get("last_heartbeat", ""))
    except ValueError:
        beat = None
    return NodeOut(
        role=raw.get("role", ""),
        node_id=raw.get("node_id", ""),
        last_heartbeat=None if beat is None else datetime.fromtimestamp(beat, UTC),
        age_s=None if beat is None else round(max(0.0, now_s - beat), 3),
        info={k: v for k, v in raw.items() if k not in _NODE_FIELDS},
        queues=presence.queues_of(raw),
        actions=presence.actions_of(raw),
        shell=None if (cap := presence.capability_of(raw)) is None else cap.shell,
        runs=share,
    )


def unserved(found: list[dict[str, str]]) -> list[UnservedOut]:
    """What executors reported unserved (a task action, shell jobs) that still no live executor runs."""
    reporters: dict[presence.Needs, list[str]] = {}
    for node in found:
        for needs in presence.unserved_of(node):
            reporters.setdefault(needs, []).append(node.get("node_id", ""))
    return [
        UnservedOut(
            queue=n.queue,
            action=n.action,
            shell=n.shell,
            message=presence.unserved_message(n),
            reported_by=sorted(by),
        )
        for n, by in sorted(reporters.items(), key=lambda item: str(item[0].entry()))
        if not presence.servers(found, n)
    ]


async def _redis_view(
    backends: Backends,
) -> tuple[str | None, list[NodeOut], dict[str, StreamOut], list[UnservedOut]]:
    client, keys = backends.redis, backends.keys
    holder = await backends.redis_call(client.get(keys.leader))
    found = await backends.redis_call(nodes(client, keys))
    stream = RunStream(client, keys)
    queues: dict[str, StreamOut] = {}
    infos = await backends.redis_call(stream.infos(await backends.redis_call(stream.known_queues())))
    for queue, info in infos.items():
        queues[queue] = StreamOut(length=info.length, pending=info.pending, lag=info.lag, consumers=info.consumers)
    now_s = time.time()
    leader = holder.decode() if isinstance(holder, bytes) else holder
    share = shares(found, now_s)
    node_list = [
        node_out(n, now_s, share.get(n.get("node_id", "")) if n.get("role") == "executor" else None) for n in found
    ]
    return leader, node_list, queues, unserved(found)


async def cluster(request: web.Request) -> web.Response:
    backends = request.app[BACKENDS]
    leader = LeaderOut()
    node_list: list[NodeOut] = []
    queues: dict[str, StreamOut] = {}
    not_served: list[UnservedOut] = []
    cache = database = "connected"
    try:
        leader.node_id, node_list, queues, not_served = await _redis_view(backends)
    except BackendUnavailable:
        cache = "disconnected"
    cluster_id = None
    try:
        leader.epoch, leader.epoch_holder = await (await backends.jobs()).leader_epoch()
        cluster_id = await database_id(await backends.pool())
    except BackendUnavailable:
        database = "disconnected"
    health = leader_health(leader.node_id, node_list, backends.settings.leader_ttl_ms / 1000)
    return respond(
        ClusterOut(
            cluster_id=cluster_id,
            leader=leader,
            nodes=node_list,
            stream=queues.get(DEFAULT_QUEUE),
            queues=queues,
            database=database,
            cache=cache,
            leader_health=health,
            unserved=not_served,
        )
    )


def leader_health(holder: str | None, node_list: list[NodeOut], ttl_s: float) -> LeaderHealthOut | None:
    """The lock holder's write health from its presence: healthy while its last PostgreSQL round
    trip is younger than its db timeout plus a ttl (it pings every third of a ttl). A holder that
    publishes no leader presence (cut off, or just elected) is not healthy."""
    if holder is None:
        return None
    leader = LeaderHealthOut(node_id=holder)
    mine = next((n for n in node_list if n.role == "dispatcher" and n.node_id == holder), None)
    if mine is None or mine.info.get("leader") != "1":
        return leader
    now_s = time.time()
    for stamp, at, age in (("db_ok_at", "db_ok_at", "db_ok_age_s"), ("wrote_at", "wrote_at", "write_age_s")):
        try:
            value = float(mine.info[stamp])
        except (KeyError, ValueError):
            continue
        setattr(leader, at, datetime.fromtimestamp(value, UTC))
        setattr(leader, age, round(max(0.0, now_s - value), 3))
    try:
        bound_s = float(mine.info.get("db_timeout_s", "")) + ttl_s
    except ValueError:
        bound_s = ttl_s
    leader.healthy = leader.db_ok_age_s is not None and leader.db_ok_age_s <= bound_s
    return leader


ROUTES = (
    Route("GET", "/api/cluster", cluster,
          "Leader, epoch, nodes (executors with their queues and actions), each queue's stream backlog and "
          "unserved task actions (nulls when a backend is down)",
          response=ClusterOut),
)  # fmt: skip
