"""Which consumers of a run stream's group the leader removes (pure: facts in, verdicts out).

Every executor reads as a consumer named by its node id; Redis keeps a consumer until someone
runs XGROUP DELCONSUMER, so without this the group lists every executor that ever ran (a new
name per Kubernetes pod, every rollout). An executor that stops cleanly removes its own
(`cronos.stream.RunStream.retire`); the leader removes those left by executors that did not
(kill -9, OOM, a lost node).

DELCONSUMER destroys the consumer's pending entries (its PEL): a token pending there would
never be delivered again. So a consumer is removed only once nothing is pending for it; entries
still pending for a gone consumer are first handed back to the group (re-added as new entries and
acknowledged, in one script), where the next executor of the queue reads them. A token handed
back twice costs a denied tick lock or claim, never a second run.

A consumer is kept while:
- its node is present (its executor heartbeats: cronos.presence), however long it has been idle
  (a live executor of a quiet queue gets no entry for hours, and Redis 7.0 does not count an
  empty read as activity);
- it was active within the bound (`idle_ms`, Redis' XINFO CONSUMERS "idle"): well above the
  XAUTOCLAIM idle (2 run leases), so the live executors take a dead one's entries over first.

A live executor removed anyway (its presence expired while PostgreSQL was away, say) loses
nothing: nothing was pending for it, and its next XREADGROUP that delivers an entry creates it
again (`tests/integration/test_stream_consumers.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Member:
    """One consumer of a queue's group, as XINFO CONSUMERS tells it."""

    queue: str
    name: str  # the executor's node id
    pending: int  # entries delivered to it and not acknowledged
    idle_ms: int  # since it last read, claimed or was delivered an entry


class Verdict(StrEnum):
    KEEP = "keep"
    REMOVE = "remove"  # nothing pending: XGROUP DELCONSUMER
    HAND_BACK = "hand_back"  # its entries idle past the bound go back to the group, then it goes if none is left


def verdict(member: Member, present: Collection[str], idle_bound_ms: int) -> Verdict:
    """What the leader does with one consumer; `present`: the node ids of live executors."""
    if member.name in present or member.idle_ms < idle_bound_ms:
        return Verdict.KEEP
    return Verdict.REMOVE if member.pending == 0 else Verdict.HAND_BACK


def to_retire(members: Iterable[Member], present: Collection[str], idle_bound_ms: int) -> list[Member]:
    """The consumers the leader retires this pass (removed, or their entries handed back first)."""
    return [m for m in members if verdict(m, present, idle_bound_ms) is not Verdict.KEEP]
