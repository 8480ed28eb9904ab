"""Node presence for the cluster view: each role refreshes a small hash with a TTL.

An executor's hash also says what it serves: `queues` (comma-separated, as it always did),
`actions` (a JSON list: the task names it registered), `unserved` (a JSON list of
[queue, action] pairs it recently saw no live executor serve) and how many runs it started
(`RunCounts`: its share on the cluster page). The pure helpers below read them for the executors'
routing (executor.routing), /api/cluster and the API's create-time warning. A node that stops
cleanly removes its hash (`leave`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cronos.keys import Keys


@dataclass(frozen=True, slots=True)
class RunCounts:
    """An executor's share of the work, carried by its presence (executor.tally writes it, the
    cluster view reads it): runs it started since it started, runs it started over the last
    `recent_s` seconds (the window, shorter for a node younger than it), its last claim (unix)."""

    started: int
    recent: int
    recent_s: float
    claimed_at: float | None

    def fields(self) -> dict[str, str]:
        found = {"runs_started": str(self.started), "runs_recent": str(self.recent), "recent_s": f"{self.recent_s:.1f}"}
        if self.claimed_at is not None:
            found["claimed_at"] = f"{self.claimed_at:.3f}"
        return found

    @property
    def rate(self) -> float:
        """Runs started a second over the window."""
        return self.recent / self.recent_s if self.recent_s > 0 else 0.0


RUN_FIELDS = ("runs_started", "runs_recent", "recent_s", "claimed_at")


def runs_of(node: dict[str, str]) -> RunCounts | None:
    """The run counts an executor announced; None for another role, an executor of an older
    release, or garbled fields."""
    try:
        claimed = node.get("claimed_at")
        return RunCounts(
            started=int(node["runs_started"]),
            recent=int(node["runs_recent"]),
            recent_s=float(node["recent_s"]),
            claimed_at=None if claimed is None else float(claimed),
        )
    except (KeyError, ValueError):
        return None


async def beat(client: Any, keys: Keys, role: str, node_id: str, ttl_s: float, **info: Any) -> None:
    key = keys.node_heartbeat(role, node_id)
    fields = {"role": role, "node_id": node_id, "last_heartbeat": f"{time.time():.3f}"}
    fields.update(
        {k: v if isinstance(v, str) else json.dumps(v) if isinstance(v, list) else str(v) for k, v in info.items()}
    )
    pipe = client.pipeline(transaction=False)
    pipe.hset(key, mapping=fields)
    pipe.pexpire(key, int(ttl_s * 1000))
    await pipe.execute()


async def leave(client: Any, keys: Keys, role: str, node_id: str) -> None:
    """Remove this node's presence as it stops cleanly: the cluster view drops it at once, not
    when its ttl runs out."""
    await client.delete(keys.node_heartbeat(role, node_id))


async def nodes(client: Any, keys: Keys) -> list[dict[str, str]]:
    found = []
    async for key in client.scan_iter(match=keys.node_pattern, count=500):
        raw = await client.hgetall(key)
        if raw:
            found.append({_s(k): _s(v) for k, v in raw.items()})
    return sorted(found, key=lambda n: (n.get("role", ""), n.get("node_id", "")))


def queues_of(node: dict[str, str]) -> list[str]:
    """The queues an executor reads (empty for other roles)."""
    return [q for q in node.get("queues", "").split(",") if q]


def actions_of(node: dict[str, str]) -> list[str] | None:
    """The task actions an executor announced; None when it announced none (another role, or an
    executor of an older release: it may serve anything)."""
    return _json_list(node.get("actions"))


def unserved_of(node: dict[str, str]) -> list[tuple[str, str]]:
    """The (queue, action) pairs an executor recently saw no live executor serve."""
    pairs = _json_list(node.get("unserved")) or []
    return [(str(p[0]), str(p[1])) for p in pairs if isinstance(p, list) and len(p) == 2]


def serves(node: dict[str, str], queue: str, action: str) -> bool:
    """Whether the node is an executor of `queue` that runs `action` (one announcing no actions,
    of an older release, is taken to run every action, as it claims every token)."""
    if node.get("role") != "executor" or queue not in queues_of(node):
        return False
    actions = actions_of(node)
    return actions is None or action in actions


def servers(found: Iterable[dict[str, str]], queue: str, action: str, *, but: str | None = None) -> list[str]:
    """The node ids of the live executors of `queue` that run `action` (but the node `but`)."""
    return [n.get("node_id", "") for n in found if n.get("node_id") != but and serves(n, queue, action)]


def _json_list(raw: str | None) -> list[Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
