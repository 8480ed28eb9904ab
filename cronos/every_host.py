"""Runs on every host (issue 40): which executors get a run of a per-host job's tick. Pure.

A job with `hosts` set runs once per live executor able to run it (its queue, its action or shell:
`cronos.presence.can_run`), or on `count` of them, or on those announcing `label` (`key=value`).
The leader decides once per tick, from the presence it read for the round: an executor that joins
or leaves changes the set from the next tick on, never a tick already written.

`count` picks by rendezvous hashing of (job, node): the same hosts tick after tick while the fleet
holds, and an executor leaving moves only its own share to another. Each host's run is its own row
(`runs.host`), so "one run per (job, tick, attempt)" (G1) holds per host: the unique key carries it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cronos import presence

# The skip reason of a per-host job's tick row itself: its runs are the per-host rows beside it.
SKIP_PER_HOST = "per_host"
# A per-host tick no live executor could take: recorded, never silently lost (G2).
SKIP_NO_HOST = "no_host"


@dataclass(frozen=True, slots=True)
class HostSpec:
    """A job's `hosts`: every able executor, `count` of them at most, those with `label`."""

    count: int | None = None
    label: tuple[str, str] | None = None  # (key, value)


@dataclass(frozen=True, slots=True)
class Host:
    """A live executor as the leader sees it in presence."""

    node_id: str
    capability: presence.Capability
    labels: Mapping[str, str] = field(default_factory=dict)


def spec_of(raw: Mapping[str, object] | None) -> HostSpec | None:
    """A job's stored `hosts` (None: one run per tick, as ever). Malformed parts are ignored: the
    API refuses them before they are stored."""
    if raw is None:
        return None
    count = raw.get("count")
    label = raw.get("label")
    return HostSpec(
        count if isinstance(count, int) and count > 0 else None,
        parse_label(label) if isinstance(label, str) else None,
    )


def parse_label(text: str) -> tuple[str, str] | None:
    """`key=value` as a pair; None when it is not one."""
    key, sep, value = text.partition("=")
    return (key, value) if sep and key and value else None


def hosts_of(nodes: Iterable[Mapping[str, str]]) -> list[Host]:
    """The executors among presence's nodes, with what they can run and their labels."""
    found = []
    for node in nodes:
        cap = presence.capability_of(dict(node))
        if cap is not None and node.get("node_id"):
            found.append(Host(node["node_id"], cap, labels_of(node.get("labels", ""))))
    return found


def labels_of(text: str) -> dict[str, str]:
    """An executor's announced labels, `k=v,k2=v2` (CRONOS_EXECUTOR_LABELS)."""
    pairs = (parse_label(part.strip()) for part in text.split(","))
    return dict(p for p in pairs if p is not None)


def choose(spec: HostSpec, job_id: int, needs: presence.Needs, hosts: Iterable[Host]) -> list[str]:
    """The node ids that get a run of this tick, sorted, each once."""
    able = {
        h.node_id
        for h in hosts
        if presence.can_run(h.capability, needs.queue, needs.action, needs.shell)
        and (spec.label is None or h.labels.get(spec.label[0]) == spec.label[1])
    }
    if spec.count is not None and len(able) > spec.count:
        able = set(sorted(able, key=lambda node: _weight(job_id, node))[: spec.count])
    return sorted(able)


def _weight(job_id: int, node_id: str) -> bytes:
    """Rendezvous weight of (job, node): lowest first. Stable across processes and restarts."""
    return hashlib.blake2b(f"{job_id}/{node_id}".encode(), digest_size=8).digest()
