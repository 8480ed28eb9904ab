"""Misfire policy and deterministic jitter (pure: `now` is always a parameter).

As Quartz's misfire threshold: a tick late by at most its job's misfire grace (or by
ON_TIME_S, whichever is larger) runs, late, whatever the policy — a leader failover or a
short outage loses no tick. The policy decides only about ticks late *beyond* the grace
(a long outage, a leader paused for minutes):

- `skip`: each is skipped "misfired";
- `run_once`: they are coalesced into one run — the newest of them runs, unless a tick
  within the grace follows (that one is the run), and the others are skipped "misfired";
- `run_all`: each runs (the planner paces the catch-up).

Every tick handed in comes back as exactly one decision, so none is ever silently
lost (G2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

from cronos.models import SKIP_MISFIRED, MisfirePolicy

# Lateness up to which a tick counts as dispatched on time (a busy loop, a slow commit).
ON_TIME_S = 1.0

Decision = Literal["run", "skip"]


def decide(
    policy: MisfirePolicy,
    ticks: Sequence[datetime],
    now: datetime,
    grace_s: float,
    *,
    complete: bool = True,
    on_time_s: float = ON_TIME_S,
) -> list[Decision]:
    """One decision per tick (ascending, all <= now).

    `complete=False` says more due ticks follow in a later chunk, so under `run_once`
    none of these misfired ticks is the newest one (the run goes to a later tick).
    """
    grace_after = now - timedelta(seconds=max(grace_s, on_time_s))
    decisions: list[Decision] = []
    newest = len(ticks) - 1
    for index, tick in enumerate(ticks):
        if tick >= grace_after or policy == "run_all":
            decisions.append("run")
        elif policy == "skip":
            decisions.append("skip")
        else:  # run_once: only the last tick of a complete list can stand for the misfired ones
            decisions.append("run" if complete and index == newest else "skip")
    return decisions


SKIP_REASON = SKIP_MISFIRED


def jitter_s(job_id: int, scheduled_for_ms: int, max_jitter_s: float) -> float:
    """A deterministic offset in [0, max_jitter_s): the same tick always gets the same one.

    Derived from a hash of the tick identity, so every node (and every leader after a
    failover) computes the same due time for the same tick.
    """
    if max_jitter_s <= 0:
        return 0.0
    digest = hashlib.blake2b(f"{job_id}:{scheduled_for_ms}".encode(), digest_size=8).digest()
    fraction = int.from_bytes(digest, "big") / 2**64
    # Millisecond resolution: due times survive a round trip through the database exactly.
    return int(fraction * max_jitter_s * 1000) / 1000
