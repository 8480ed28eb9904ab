"""The reaper, on the leader and fenced: runs whose lease expired end `failed` "executor lost"
(with the retry the job allows); queued runs past their misfire grace end skipped "expired".
(The backlog still within its grace is the watchdog's: `cronos_runs_overdue`.)

It waits one lease after a PostgreSQL reconnect before reaping, so live executors can
heartbeat again first.
"""

from __future__ import annotations

import time

from cronos.store.runs import RunStore
from dispatcher.election import Election
from dispatcher.lifetime import Lifetime

REAP_BATCH = 1000


async def run(term: Lifetime, store: RunStore, election: Election, lease_s: float, connected_at: float) -> None:
    """Reap every half lease until the term ends; `connected_at` is when PostgreSQL was reached (monotonic)."""
    await term.sleep(max(0.0, connected_at + lease_s - time.monotonic()))
    while True:
        reaped = await store.reap(election.check(), limit=REAP_BATCH)
        while reaped.lost + reaped.expired >= REAP_BATCH:  # a backlog: keep going, yielding
            term.checkpoint()
            reaped = await store.reap(election.check(), limit=REAP_BATCH)
        await term.sleep(lease_s / 2)
