"""`task` runs: the function registered under `payload.action` with `@cronos.task`.

A plain function runs in a thread, which nothing can interrupt: cancelled (its timeout, a cancel's
grace, a drain), it keeps its run running until it returns (cronos.tasks.call), reported here as
overrunning (a warning, the cronos_runs_overrunning gauge).
"""

from __future__ import annotations

import logging
from datetime import timedelta

import msgspec

from cronos import metrics, tasks, traces
from cronos.store.runs import ClaimedRun
from cronos.tasks import Cancellation
from executor.kinds.base import Env, RunFailed, excerpt

log = logging.getLogger("cronos.task")


async def run(run: ClaimedRun, env: Env, cancellation: Cancellation) -> str | None:
    action = run.payload.get("action")
    if not isinstance(action, str) or not action:
        raise RunFailed("payload.action is missing: a task job names its function in payload.action")
    fn = tasks.lookup(action)
    if fn is None:
        raise RunFailed(f"no task registered for action '{action}'")
    ctx = tasks.RunContext(
        job_id=run.job_id,
        run_id=run.id,
        scheduled_for=run.scheduled_for,
        attempt=run.attempt,
        logger=logging.getLogger(f"cronos.task.{action}"),
        deadline=run.started_at + timedelta(seconds=run.timeout_s),
        cancellation=cancellation,
        traceparent=traces.TRACEPARENT.get(),
    )
    value = await tasks.call(fn, dict(run.payload), ctx, on_overrun=_overrun)
    if value is None:
        return None
    if isinstance(value, str | bytes):
        return excerpt(value, env.settings.result_max_bytes)
    try:
        encoded = msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError):
        encoded = repr(value).encode()
    return excerpt(encoded, env.settings.result_max_bytes)


def _overrun(running: bool) -> None:
    """A cancelled plain function's thread runs on (True) or has returned (False); the run's ids
    are bound to the log context by the pipeline."""
    if running:
        metrics.RUNS_OVERRUNNING.inc()
        log.warning(
            "task overrunning: its thread ignores the stop and runs on; the run stays running until it returns",
            extra={"event": "run.overrunning"},
        )
    else:
        metrics.RUNS_OVERRUNNING.dec()
        log.warning("overrunning task returned: the run ends now", extra={"event": "run.overrun_ended"})
