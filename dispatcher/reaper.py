"""The reaper, on the leader and fenced: runs whose lease expired end `failed` "executor lost"
(with the retry the job allows), or, reserved and never started, go back in the outbox; queued
runs past their misfire grace end skipped "expired".
(The backlog still within its grace is the watchdog's: `cronos_runs_overdue`.)

It waits one lease after a PostgreSQL reconnect before reaping, so live executors can
heartbeat again first.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cronos.store.runs import RunStore
from dispatcher.election import Election
from dispatcher.lifetime import Lifetime

REAP_BATCH = 1000


async def run(
    term: Lifetime,
    store: RunStore,
    election: Election,
    lease_s: float,
    connected_at: float,
    take_soon: Callable[[], None] = lambda: None,
) -> None:
    """Reap every half lease until the term ends; `connected_at` is when PostgreSQL was reached
    (monotonic). Reserved runs released back in the outbox are pushed at once (`take_soon`)."""
    await term.sleep(max(0.0, connected_at + lease_s - time.monotonic()))
    while True:
        while True:
            reaped = await store.reap(election.check(), limit=REAP_BATCH)
            if reaped.released:
                take_soon()
            if max(reaped.lost, reaped.expired, reaped.released) < REAP_BATCH:
                break
            term.checkpoint()  # a backlog: keep going, yielding
        await term.sleep(lease_s / 2)
