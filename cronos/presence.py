"""Node presence for the cluster view: each role refreshes a small hash with a TTL.

An executor's hash also says what it can run (its `Capability`): `queues` (comma-separated, as it
always did), `actions` (a JSON list: the task names it registered), `shell` ("1" when it runs shell
jobs: CRONOS_ALLOW_SHELL); `unserved` (a JSON list of what it recently saw no live executor able to
run: [queue, action] for a task, [queue, null, "shell"] for a shell job) and how many runs it started
(`RunCounts`: its share on the cluster page). `can_run` is the one rule of who runs what: the
executors' routing (executor.routing, executor.pipeline), /api/cluster and the API's create-time
warning apply it. A node that stops cleanly removes its hash (`leave`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Container, Iterable
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


@dataclass(frozen=True, slots=True)
class Needs:
    """What a run needs of the executor that takes it: its queue, and a task's action or shell."""

    queue: str
    action: str | None = None  # a task job's payload.action
    shell: bool = False  # a shell job: only an executor with CRONOS_ALLOW_SHELL=1 runs it
    host: str | None = None  # a per-host run (cronos.every_host): only that executor runs it

    def what(self) -> str:
        """What it needs beside the queue, in words."""
        if self.host is not None:
            return f"host '{self.host}'"
        return "shell jobs (CRONOS_ALLOW_SHELL=1)" if self.shell else f"action '{self.action}'"

    def entry(self) -> list[str | None]:
        """How an executor's presence lists it as unserved (`unserved_of` reads it back)."""
        return [self.queue, None, "shell"] if self.shell else [self.queue, self.action]


def unserved_message(needs: Needs) -> str:
    """Why a run waits when no live executor can run it (/api/cluster, the run, the job's warning)."""
    what = "runs shell jobs" if needs.shell else f"serves action '{needs.action}'"
    return f"no live executor of queue '{needs.queue}' {what}: its runs wait queued"


@dataclass(frozen=True, slots=True)
class Capability:
    """What an executor can run. `actions` None: it announced none (an executor of an older release:
    it claims every token, so it is taken to run every action); `shell` None likewise."""

    queues: Collection[str]
    actions: Container[str] | None
    shell: bool | None


def can_run(cap: Capability, queue: str, action: str | None, shell: bool) -> bool:
    """Whether an executor with `cap` can run a run of `queue` (a task's `action`, a `shell` job).
    Pure, and cheap: every token an executor reads goes through it."""
    if queue not in cap.queues:
        return False
    if action is not None and cap.actions is not None and action not in cap.actions:
        return False
    return not shell or cap.shell is not False


def capability_of(node: dict[str, str]) -> Capability | None:
    """What an executor announced it can run; None for another role."""
    if node.get("role") != "executor":
        return None
    shell = node.get("shell")
    return Capability(queues_of(node), actions_of(node), None if shell is None else shell == "1")


def queues_of(node: dict[str, str]) -> list[str]:
    """The queues an executor reads (empty for other roles)."""
    return [q for q in node.get("queues", "").split(",") if q]


def actions_of(node: dict[str, str]) -> list[str] | None:
    """The task actions an executor announced; None when it announced none (another role, or an
    executor of an older release: it may serve anything)."""
    return _json_list(node.get("actions"))


def unserved_of(node: dict[str, str]) -> list[Needs]:
    """What an executor recently saw no live executor able to run (malformed entries dropped)."""
    found = []
    for p in _json_list(node.get("unserved")) or []:
        if not isinstance(p, list) or not p or not isinstance(p[0], str):
            continue
        if len(p) == 2 and isinstance(p[1], str):
            found.append(Needs(p[0], p[1]))
        elif len(p) == 3 and p[2] == "shell":
            found.append(Needs(p[0], shell=True))
    return found


def serves(node: dict[str, str], needs: Needs) -> bool:
    """Whether the node is an executor that can run what `needs` says."""
    cap = capability_of(node)
    if needs.host is not None and node.get("node_id") != needs.host:
        return False
    return cap is not None and can_run(cap, needs.queue, needs.action, needs.shell)


def servers(found: Iterable[dict[str, str]], needs: Needs, *, but: str | None = None) -> list[str]:
    """The node ids of the live executors that can run what `needs` says (but the node `but`)."""
    return [n.get("node_id", "") for n in found if n.get("node_id") != but and serves(n, needs)]


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
