"""Misfire policy and deterministic jitter (pure: `now` is always a parameter).

A tick is *on time* while its lateness (now - tick) is at most ON_TIME_S: it always
runs, whatever the policy. A *late* tick is one the leader did not write in time
(failover, outage, a paused leader); the job's misfire policy decides what it becomes:

- older than the job's grace: skipped "misfired", whatever the policy;
- within the grace: `run_all` runs each one, `skip` skips each one, `run_once` runs only
  the newest due tick (on time or late) and skips the other late ones.

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
    none of these late ticks is the newest one (the run goes to the newest overall).
    """
    on_time_after = now - timedelta(seconds=on_time_s)
    grace_after = now - timedelta(seconds=max(grace_s, on_time_s))
    decisions: list[Decision] = []
    newest = len(ticks) - 1
    for index, tick in enumerate(ticks):
        if tick > on_time_after:
            decisions.append("run")
        elif tick < grace_after or policy == "skip":
            decisions.append("skip")
        elif policy == "run_all":
            decisions.append("run")
        else:  # run_once: the newest tick runs for all of them, if it is still in grace
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
