"""The lease heartbeat, every third of a lease: one statement extends the leases of the
runs in flight here (a run whose work is over only once it is not young: `beaten`) and one
script call renews their tick locks, both only where this
node still owns them; their stream entries are touched so no other executor reclaims
them; the node's presence is refreshed (with the queues, task actions and shell jobs it serves,
and what it saw no executor serve: executor.routing); and the node's clock is measured against
PostgreSQL's again (cronos.clock: tokens are held and claimed by PostgreSQL's clock). A run
that is no longer ours (reaped while we were frozen, or replaced) has its work cancelled and
reports nothing. A run someone asked to cancel (the extension returns who) is signalled to stop
(executor.cancels).

The lease lives in PostgreSQL; the Redis part of a beat is bounded by the beat interval, so
an executor cut from Redis (a silent partition) still extends its leases every interval and
its runs are not reaped while it works on them. The PostgreSQL part is watched the same way
but not given up (a slow answer still extends the leases): a node whose database does not
answer within the interval (a cut link, where a statement fails only after its command
timeout) reports it to its health at once, so it stops taking tokens it could only hold,
locked and unclaimed, until the watchdog pushes them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from cronos import presence, tasks
from cronos.errors import BackendUnavailable
from cronos.logs import bind
from executor import cancels
from executor.deps import Deps
from executor.running import InFlight

log = logging.getLogger("cronos.executor.heartbeat")

LOST = "ownership lost"


def beaten(flights: Iterable[InFlight], db_now: float, lease_s: float) -> list[InFlight]:
    """The runs a beat extends (`db_now`: PostgreSQL's clock, unix time): every run whose work goes
    on (a beat is also how it hears it was lost or cancelled), and a run whose work is over, its
    result waiting for its batch, once it was claimed at least a sixth of a lease ago. A younger
    one has more than five sixths of its lease left, so at least half a lease at the next beat;
    there is nothing to signal to it (its result is written only if the run is still ours). At
    thousands of runs a second most runs in flight are such results, and extending their leases
    was a beat of thousands of rows every third of a lease."""
    young = lease_s / 6
    return [f for f in flights if f.working or db_now - f.run.started_at.timestamp() >= young]


async def beat(deps: Deps) -> list[int]:
    """One heartbeat of the runs in flight; returns the ids of runs found lost (their work is
    being cancelled)."""
    flights = beaten(deps.in_flight.values(), deps.clock.time(), deps.lease_s)
    if not flights:
        return []
    async with _within(deps, "postgresql", deps.lease_s / 3):
        owned = await deps.store.beat(
            [f.run.id for f in flights], deps.node_id, deps.lease_s, [f.run.scheduled_for for f in flights]
        )
    lost: list[int] = []
    for flight in flights:
        if flight.run.id in owned or not flight.working:
            continue  # a run whose work is over is judged by its conditional result write
        flight.lost = True
        flight.cancel(LOST)
        lost.append(flight.run.id)
        with bind(job_id=flight.run.job_id, run_id=flight.run.id, attempt=flight.run.attempt):
            log.warning("run no longer owned here: cancelling its work", extra={"event": "run.lost"})
    for flight in flights:
        by = owned.get(flight.run.id)
        if by is not None:
            cancels.request(flight, by, deps.cancel_grace_s)
    mine = [f for f in flights if f.run.id in owned]
    async with _within(deps, "redis", deps.lease_s / 3):
        await deps.tick_locks.renew([f.lock_key for f in mine], int(deps.lease_s * 1000))
        await deps.stream.touch(deps.node_id, [f.entry for f in mine])
    return lost


@contextlib.asynccontextmanager
async def _within(deps: Deps, backend: str, seconds: float) -> AsyncIterator[None]:
    """Bound a beat's calls to `backend`. PostgreSQL's are only watched: past `seconds` it is
    reported to the node's health at that instant, and the call goes on (a slow database still
    extends the leases). Redis' are given up (the consumer's own read notices a Redis outage)."""
    silent = BackendUnavailable(backend, f"no reply within {seconds:g} s")
    watched = backend == "postgresql"
    reported = asyncio.get_running_loop().call_later(seconds, deps.health.report, silent) if watched else None
    try:
        async with asyncio.timeout(None if watched else seconds):
            yield
    except TimeoutError:
        raise silent from None
    finally:
        if reported is not None:
            reported.cancel()


async def run(deps: Deps, client: Any, concurrency: int, done: asyncio.Event) -> None:
    """Beat until `done`; a failed beat is logged and retried at the next one."""
    interval = deps.lease_s / 3
    while not done.is_set():
        try:
            async with _within(deps, "postgresql", interval):
                await deps.store.sync_clock(deps.clock)
            await beat(deps)
            async with _within(deps, "redis", interval):
                await presence.beat(
                    client,
                    deps.keys,
                    "executor",
                    deps.node_id,
                    deps.lease_s * 3,
                    in_flight=len(deps.in_flight),
                    concurrency=concurrency,
                    queues=",".join(deps.stream.queues),
                    actions=tasks.registered(),  # what it takes (executor.routing, /api/cluster)
                    shell="1" if deps.capability.shell else "0",
                    labels=deps.env.settings.executor_labels,  # per-host jobs' `hosts.label` (cronos.every_host)
                    unserved=deps.routing.reported(time.time()),
                    **deps.tally.counts().fields(),  # its share of the work (executor.tally)
                )
        except BackendUnavailable as exc:
            if exc.backend == "postgresql":
                deps.health.report(exc)  # reading pauses until it answers its probe again
            log.warning("heartbeat failed: %s", exc, extra={"event": "executor.heartbeat_failed"})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=interval)
