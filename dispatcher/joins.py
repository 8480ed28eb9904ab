"""Joins that time out, decided by the leader (issue 40, item 5): a join of a child's parents for
one logical tick whose deadline passed runs or skips the child as its `chain.join.on_timeout` says
(cronos.chains decides, cronos.store.joins writes, fenced by the epoch).

It looks once a second (one read of the pending joins' index; the fenced pass only when one is
due), so a join times out within about a second of its deadline, whichever node leads then. Every
FORGET_S it deletes the joins decided before the runs' retention (CRONOS_RUNS_RETENTION; 0 keeps all).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from cronos.store.joins import JoinStore
from dispatcher.election import Election
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.joins")

POLL_S = 1.0
BATCH = 100
FORGET_S = 300.0
FORGET_BATCH = 10_000


async def run(term: Lifetime, store: JoinStore, election: Election, retention_s: float, poll_s: float = POLL_S) -> None:
    forgot_at = time.monotonic()
    while True:
        due = await store.next_deadline()
        now = datetime.now(UTC)
        if retention_s > 0 and time.monotonic() - forgot_at >= FORGET_S:
            forgot_at = time.monotonic()
            await store.forget(election.check(), now - timedelta(seconds=retention_s), FORGET_BATCH)
        if due is not None and due <= now:
            epoch = election.check()
            decided = await store.decide_due(epoch, BATCH, now)
            if decided:
                log.info("joins timed out", extra={"event": "joins.timed_out", "count": decided, "epoch": epoch})
            if decided == BATCH:
                term.checkpoint()
                continue  # more are due
        await term.sleep(poll_s)
