"""A cancel of a running run, on the executor that runs it (cronos.lifecycle Event.STOPPED).

The API records the request beside the run (run_cancels) and notifies `cronos_cancels`: `listen`
hears it within milliseconds. The heartbeat's lease extension returns the request too
(executor.heartbeat), so a notification missed (the LISTEN connection down, the run not in hand
yet) is acted on within a beat, a third of the lease (at most 3.3 s at the default 10 s lease).
Neither costs anything for a run nobody cancels. Then:
the work is signalled at once (a task's `ctx.cancelled`, a shell command's SIGTERM, an http run
waiting for its host's limit stops waiting), and after
the grace (CRONOS_CANCEL_GRACE_S) cancelled like a timeout (a shell run's processes killed, an
http request aborted, an async task cancelled; a plain function's thread is waited for). From the
signal on, the run ends `cancelled` by whoever asked (executor.running.outcome_of), not retried;
its end wakes the runs waiting behind it like any end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from cronos import lifecycle, metrics
from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable
from cronos.logs import bind
from cronos.store import cancels
from executor.deps import Deps
from executor.running import InFlight

log = logging.getLogger("cronos.executor")


def request(flight: InFlight, by: str, grace_s: float) -> bool:
    """Signal `flight`'s work that `by` cancelled its run, and cancel the work after `grace_s`.
    False when there is nothing to do: already signalled, or its work is over (its result is
    being recorded)."""
    if flight.cancel_by is not None or not flight.working:
        return False
    reason = lifecycle.cancelled_by(by)
    flight.cancel_by = by
    flight.cancellation.set(reason)
    flight.force = asyncio.get_running_loop().call_later(grace_s, _force, flight, reason)
    metrics.RUNS_CANCEL_SIGNALLED.inc()
    with bind(job_id=flight.run.job_id, run_id=flight.run.id, attempt=flight.run.attempt):
        log.info(
            "run cancelled by %s: its work is told to stop", by,
            extra={"event": "run.cancel_signalled", "actor": by, "grace_s": grace_s},
        )  # fmt: skip
    return True


def _force(flight: InFlight, reason: str) -> None:
    if not flight.working:
        return
    with bind(job_id=flight.run.job_id, run_id=flight.run.id, attempt=flight.run.attempt):
        log.warning("cancel grace over: cancelling the run's work", extra={"event": "run.cancel_forced"})
    flight.cancel(reason)


async def listen(deps: Deps, dsn: str, done: asyncio.Event) -> None:
    """The executor's side loop: each cancel request PostgreSQL notifies for a run in hand here is
    signalled at once. It never ends the executor: a lost connection is logged and opened again
    after a backoff (the heartbeat covers meanwhile)."""

    def heard(asked: cancels.CancelRequest) -> None:
        flight = deps.in_flight.get(asked.run_id)
        if flight is not None:
            request(flight, asked.by, deps.cancel_grace_s)

    backoff = Backoff(base_s=0.5, cap_s=10.0)
    while not done.is_set():
        try:
            await cancels.listen(dsn, heard, done, ping_s=max(deps.lease_s, 1.0))
        except BackendUnavailable as exc:
            log.warning("cancel notifications not heard: %s", exc, extra={"event": "executor.cancels_unheard"})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=backoff.next_delay())
