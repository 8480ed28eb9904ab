"""Step 4: run a claimed run's work under its timeout, and turn how it ended into an Outcome.

The work runs inline in the token's own task (no extra task per run): the heartbeat and
the drain cancel it through its `InFlight`, and `run_under_timeout` turns the
cancellation back into an outcome (or into nothing, when ownership was lost).

A cancel (executor.cancels) first sets the run's `Cancellation` (a task sees `ctx.cancelled`, a
shell command gets SIGTERM), then after the grace cancels the work like a timeout does; from the
signal on the run ends `cancelled`, by whoever asked, whatever the work then returns.

The job's own secret values (cronos.redact.secret_values) never leave the run: they are
scrubbed from every line logged while the work runs and from its error, traceback and result
before the outcome is made (one place: `outcome_of`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from cronos import delays, lifecycle, metrics
from cronos.logs import bind_secrets
from cronos.redact import scrub, secret_values
from cronos.run_usage import Meter, Usage
from cronos.store.runs import ClaimedRun, Outcome
from cronos.stream import EntryRef
from cronos.tasks import Cancellation
from executor import kinds

log = logging.getLogger("cronos.executor")

DRAIN_CANCELLED = "cancelled: executor shutting down"
# A run's error and traceback are bounded like its result: user code controls their size.
MAX_ERROR_BYTES = 4096
MAX_TRACEBACK_BYTES = 32_768


@dataclass(eq=False)
class InFlight:
    """A claimed run while it executes; the heartbeat and the drain act on it."""

    run: ClaimedRun
    lock_key: str
    entry: EntryRef  # (queue, stream entry id)
    task: asyncio.Task[Any] | None = None  # set only while the work runs
    cancel_reason: str | None = None
    lost: bool = False  # ownership went elsewhere: cancel, report nothing
    cancellation: Cancellation = field(default_factory=Cancellation)  # the work's signal (ctx.cancelled)
    cancel_by: str | None = None  # who cancelled the run (executor.cancels): it ends `cancelled`
    force: asyncio.TimerHandle | None = None  # the end of a cancel's grace

    @property
    def working(self) -> bool:
        return self.task is not None

    def cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
        task, self.task = self.task, None  # one cancellation at most
        if task is not None:
            task.cancel()


async def run_under_timeout(flight: InFlight, env: kinds.Env, node_id: str) -> Outcome | None:
    """Run the work under the job's timeout. None when ownership was lost."""
    run = flight.run
    delay = delays.start_delay_s(run.scheduled_for, run.started_at) or 0.0
    metrics.RUN_START_DELAY.observe(max(delay, 0.0))
    metrics.RUN_HELD_BACK.observe(max(delays.held_back_s(run.scheduled_for, run.due_at), 0.0))
    metrics.RUN_WAITED.observe(max(delays.waited_s(run.due_at, run.started_at) or 0.0, 0.0))
    metrics.RUNS_IN_FLIGHT.inc()
    # DEBUG: at a thousand runs a second, a line per start and per end was a third of the
    # executor's CPU; the end's line (and the ledger) carries the start delay.
    log.debug("run started", extra={"event": "run.started", "kind": run.kind, "start_delay_s": round(delay, 4)})
    started = time.monotonic()
    task = asyncio.current_task()
    result: str | None = None
    failure: BaseException | None = None
    secrets = secret_values(run.kind, run.payload)
    writer = env.output
    capture = None
    meter = Meter()
    try:
        flight.task = task
        with (
            bind_secrets(secrets) if secrets else contextlib.nullcontext(),  # most runs have none
            writer.capturing(run.id, run.scheduled_for, secrets) if writer else contextlib.nullcontext() as capture,
        ):
            async with asyncio.timeout(run.timeout_s) as deadline:
                result = await kinds.execute(run, env, flight.cancellation, meter)
    except asyncio.CancelledError:  # heartbeat (lost), drain, or the executor going away
        if flight.task is not None or flight.cancel_reason is None:
            flight.cancel_reason = flight.cancel_reason or DRAIN_CANCELLED  # not ours: shutdown
        if task is not None:
            task.uncancel()
        failure = asyncio.CancelledError()
    except TimeoutError as exc:
        if deadline.expired():
            flight.cancel_reason = f"timed out after {run.timeout_s:g} s"
            failure = asyncio.CancelledError()
        else:  # the work itself raised TimeoutError
            failure = exc
    except Exception as exc:  # noqa: BLE001 - the run failed: recorded with its traceback
        failure = exc
    finally:
        usage = meter.usage(time.monotonic() - started)  # the work's alone: not the recording after it
        flight.task = None
        if flight.force is not None:
            flight.force.cancel()
        metrics.RUNS_IN_FLIGHT.dec()
    if writer is not None and capture is not None and not capture.silent:
        await writer.end(capture)  # its last lines written before its outcome: readers find them all
    if flight.lost:
        return None
    return outcome_of(flight, node_id, result, failure, (time.monotonic() - started) * 1000, secrets, usage)


def outcome_of(
    flight: InFlight,
    node_id: str,
    result: str | None,
    failure: BaseException | None,
    duration_ms: float,
    secrets: tuple[str, ...] = (),
    usage: Usage | None = None,
) -> Outcome:
    """How the run ended, `secrets` scrubbed from its error, traceback (before they are cut to
    their bounds) and result (cut by its kind: a secret across the cut may leave a part)."""
    run = flight.run
    if result is not None:
        result = scrub(result, secrets)
    if flight.cancel_by is not None:  # signalled: cancelled, whatever the work did then; never retried
        kept = failure.result if isinstance(failure, kinds.RunFailed) else result
        return Outcome(
            run_id=run.id,
            node_id=node_id,
            scheduled_for=run.scheduled_for,
            state="cancelled",
            error=lifecycle.cancelled_by(flight.cancel_by),
            result=None if kept is None else scrub(kept, secrets),
            duration_ms=duration_ms,
            holds_slot=run.concurrency_group is not None,
            usage=usage,
        )
    if failure is None:
        return Outcome(
            run_id=run.id,
            node_id=node_id,
            state="completed",
            result=result,
            duration_ms=duration_ms,
            scheduled_for=run.scheduled_for,
            holds_slot=run.concurrency_group is not None,
            usage=usage,
        )
    trace: str | None = None
    if isinstance(failure, asyncio.CancelledError):
        error = flight.cancel_reason or DRAIN_CANCELLED
    else:
        trace = kinds.excerpt(scrub("".join(traceback.format_exception(failure)), secrets), MAX_TRACEBACK_BYTES)
        error = failure.message if isinstance(failure, kinds.RunFailed) else f"{type(failure).__name__}: {failure}"
        error = kinds.excerpt(scrub(error, secrets), MAX_ERROR_BYTES) or ""
        failed = failure.result if isinstance(failure, kinds.RunFailed) else None
        result = None if failed is None else scrub(failed, secrets)
    return Outcome(
        run_id=run.id,
        node_id=node_id,
        scheduled_for=run.scheduled_for,
        state="failed",
        error=error,
        traceback=trace,
        result=result,
        duration_ms=duration_ms,
        retry_delay_s=lifecycle.retry_delay_s(run.attempt, run.max_retries, run.retry_backoff_s),
        holds_slot=run.concurrency_group is not None,
        usage=usage,
    )
