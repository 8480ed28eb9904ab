"""A cancel of a running run, on the executor that runs it (cronos.lifecycle Event.STOPPED).

The API records the request beside the run (run_cancels); the heartbeat's lease extension
returns it with the run (executor.heartbeat), so the work hears of it within a beat, a third of
the lease (at most 3.3 s at the default 10 s lease), at no cost to a run nobody cancels. Then:
the work is signalled at once (a task's `ctx.cancelled`, a shell command's SIGTERM), and after
the grace (CRONOS_CANCEL_GRACE_S) cancelled like a timeout (a shell run's processes killed, an
http request aborted, an async task cancelled; a plain function's thread is waited for). From the
signal on, the run ends `cancelled` by whoever asked (executor.running.outcome_of), not retried;
its end wakes the runs waiting behind it like any end.
"""

from __future__ import annotations

import asyncio
import logging

from cronos import lifecycle, metrics
from cronos.logs import bind
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
