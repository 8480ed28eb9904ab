"""The leader's runs-due gauges (issue 27, item 5): every few seconds, the runs its schedule book has
due in the next 30, 60 and 300 s per queue (dispatcher.due_ahead), exported as
`cronos_runs_due{queue,within_s}` and `cronos_runs_due_peak{queue,within_s}` so that an autoscaler
(KEDA, an HPA) brings an executor pool up before its herd arrives.

Memory only: no statement, no Redis call, so it cannot slow the tick write or fail with a backend.
Every queue an active job names has series (0 when nothing is due), the default queue always; a
queue no active job names any more loses them. When the term ends the series go (a node that does
not lead exports none, never a former leader's numbers).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime

from cronos import metrics
from cronos.models import DEFAULT_QUEUE
from dispatcher.due_ahead import NOTHING, Due, Tally
from dispatcher.lifetime import Lifetime
from dispatcher.schedule_book import ScheduleBook

log = logging.getLogger("dispatcher.due_gauge")

# How often the gauges are computed: within a scrape interval (15 s) and KEDA's polling (10 s).
INTERVAL_S = 5.0
# A pass costs at most this share of a core: a book whose passes are slow (a million jobs, each its
# own schedule) is counted less often instead.
MAX_SHARE = 0.05
# Groups counted between two yields to the event loop: a pass with thousands of groups due (one per
# job, hourly) must not hold up the tick write and the pushes (docs/deploying.md has the figures).
CHUNK = 500


async def compute(book: ScheduleBook, now: datetime) -> dict[str, Due]:
    """Every queue an active job names (and the default queue), with its runs due ahead of `now`."""
    tally = Tally(now)
    groups = book.ahead(tally.until)
    for start in range(0, len(groups), CHUNK):
        if start:
            await asyncio.sleep(0)
        tally.add(groups[start : start + CHUNK])
    found = tally.result()
    return {queue: found.get(queue, NOTHING) for queue in {*book.queues, *found, DEFAULT_QUEUE}}


async def run(
    term: Lifetime,
    book: ScheduleBook,
    clock: Callable[[], datetime],
    interval_s: float = INTERVAL_S,
    timer: Callable[[], float] = time.perf_counter,
) -> None:
    """Until the term ends. The first pass waits one interval: the book is loaded by then."""
    exported: set[str] = set()
    took = 0.0
    try:
        while True:
            await term.sleep(max(interval_s, took / MAX_SHARE))
            started = timer()
            try:
                due = await compute(book, clock())
            except Exception:  # a gauge must never take the leader down: logged, tried next pass
                log.warning("runs due not computed", exc_info=True, extra={"event": "due.failed"})
                continue
            exported = metrics.set_due({q: (d.runs, d.peak) for q, d in due.items()}, exported)
            took = timer() - started
            log.debug(
                "runs due computed", extra={"event": "due.computed", "queues": len(due), "ms": round(took * 1000, 2)}
            )
    finally:
        metrics.forget_due()
