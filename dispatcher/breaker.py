"""The leader's circuit breaker (issue 40): pauses the jobs whose runs failed too often in a row
(each job's `expectations.breaker.failures`, else its queue's in CRONOS_BREAKER_DEFAULTS, else
CRONOS_BREAKER_DEFAULT_FAILURES), lets a canary
through the jobs it holds and resumes them after one succeeded (cronos.store.breaker, decisions in
cronos.breaker).

It looks as often as the health evaluator judges (whose failure streaks it reads): two indexed
reads a pass, over the failing jobs and the jobs it holds.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg

from cronos.breaker import NO_DEFAULTS, QueueDefaults
from cronos.store.breaker import tend_held, trip_due
from dispatcher.election import Election
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.breaker")

BATCH = 100
_EVENTS = {
    "paused": "job.breaker_tripped",
    "canary": "job.breaker_canary",
    "resume": "job.breaker_resumed",
    "rearm": "job.breaker_rearmed",
}

Page = Callable[[int, int], Awaitable[tuple[list[Any], int | None]]]


async def _pages(term: Lifetime, page: Page, epoch: int) -> list[Any]:
    """Every page of one pass (jobs counted but not stepped do not hold back the rest)."""
    out: list[Any] = []
    after: int | None = 0
    while after is not None:
        done, after = await page(epoch, after)
        out.extend(done)
        if after is not None:
            term.checkpoint()
    return out


async def run(
    term: Lifetime,
    pool: asyncpg.Pool,
    election: Election,
    default: int,
    poll_s: float,
    queues: QueueDefaults = NO_DEFAULTS,
) -> None:
    async def trip(epoch: int, after: int) -> tuple[list[Any], int | None]:
        return await trip_due(pool, epoch, default, datetime.now(UTC), after=after, limit=BATCH, queues=queues)

    async def tend(epoch: int, after: int) -> tuple[list[Any], int | None]:
        return await tend_held(pool, epoch, datetime.now(UTC), after=after, limit=BATCH, queues=queues)

    while True:
        epoch = election.check()
        steps = [(job, "paused") for job in await _pages(term, trip, epoch)] + await _pages(term, tend, epoch)
        for job, step in steps:
            log.info(
                f"circuit breaker: {step}",
                extra={"event": _EVENTS[step], "job_id": job.id, "epoch": epoch, "revision": job.revision,
                       "note": job.pause_note},
            )  # fmt: skip
        await term.sleep(poll_s)
