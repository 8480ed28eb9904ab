"""The lease heartbeat: every third of a lease, one statement extends the leases of all
runs in flight here and one script call renews their tick locks, both only where this
node still owns them. A run that is no longer ours (reaped while we were frozen, or
replaced) has its work cancelled and reports nothing.
"""

from __future__ import annotations

import logging

from cronos.locks import renew_many
from cronos.logs import bind
from cronos.scripts import Scripts
from executor.pipeline import Deps

log = logging.getLogger("cronos.executor.heartbeat")

LOST = "ownership lost"


async def beat(deps: Deps, scripts: Scripts) -> list[int]:
    """One heartbeat; returns the ids of runs found lost (their work is being cancelled)."""
    flights = list(deps.in_flight.values())
    if not flights:
        return []
    owned = await deps.store.extend_leases([f.run.id for f in flights], deps.node_id, deps.lease_s)
    lost: list[int] = []
    for flight in flights:
        if flight.run.id in owned or not flight.working:
            continue  # a run whose work is over is judged by its conditional result write
        flight.lost = True
        flight.cancel(LOST)
        lost.append(flight.run.id)
        with bind(job_id=flight.run.job_id, run_id=flight.run.id, attempt=flight.run.attempt):
            log.warning("run no longer owned here: cancelling its work", extra={"event": "run.lost"})
    keys = [f.lock_key for f in flights if f.run.id in owned]
    await renew_many(scripts, keys, deps.node_id, int(deps.lease_s * 1000))
    return lost
