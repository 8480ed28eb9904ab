"""The leader's circuit breaker (issue 40): pauses the jobs whose runs failed
CRONOS_BREAKER_DEFAULT_FAILURES times in a row (cronos.store.breaker, decisions in cronos.breaker).

It looks as often as the health evaluator judges (whose failure streaks it reads), one indexed read
a pass, and runs only when the setting is above 0.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import asyncpg

from cronos.store.breaker import trip_due
from dispatcher.election import Election
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.breaker")

BATCH = 100


async def run(term: Lifetime, pool: asyncpg.Pool, election: Election, threshold: int, poll_s: float) -> None:
    after = 0
    while True:
        epoch = election.check()
        paused, more = await trip_due(pool, epoch, threshold, datetime.now(UTC), after=after, limit=BATCH)
        for job in paused:
            log.info(
                "job paused by its circuit breaker",
                extra={"event": "job.breaker_tripped", "job_id": job.id, "epoch": epoch, "revision": job.revision,
                       "note": job.pause_note},
            )  # fmt: skip
        if more is not None:  # the next page (jobs counted but not tripped do not hold back the rest)
            after = more
            term.checkpoint()
            continue
        after = 0
        await term.sleep(poll_s)
