"""Timed pauses, lifted by the leader (issue 25): a job paused `until` an instant is resumed then,
fenced by the epoch, audited and revised as a resume by the `dispatcher` (cronos.store.rules).

It looks once a second (one indexed read; the fenced resume only when one is due), so a pause
lifts within about a second of its instant, whichever node leads then.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from cronos.store.rules import RuleStore
from dispatcher.election import Election
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.pauses")

POLL_S = 1.0
BATCH = 100


async def run(term: Lifetime, store: RuleStore, election: Election, poll_s: float = POLL_S) -> None:
    while True:
        due = await store.next_resume()
        if due is not None and due <= datetime.now(UTC):
            epoch = election.check()
            resumed = await store.resume_due(epoch, BATCH)
            for job in resumed:
                log.info(
                    "timed pause lifted",
                    extra={"event": "job.unpaused", "job_id": job.id, "epoch": epoch, "revision": job.revision},
                )
            if len(resumed) == BATCH:
                term.checkpoint()
                continue  # more are due
        await term.sleep(poll_s)
