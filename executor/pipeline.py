"""What happens to one run token, step by step (DESIGN.md "Execution", steps 1-6).

`process` reads as the design: lock, claim (with the concurrency policy), run under the
timeout while the heartbeat keeps the lease, record, release, acknowledge. Each step is
one helper; the I/O behind them is batched across tokens by `executor.batcher`.

A token pushed ahead of its due time (the leader's push lead) is locked at once, then
held in its slot until the due instant, when every token due then is claimed in one
statement: a burst starts together instead of batch after batch, and never early.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import traceback
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cronos import metrics, retry
from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable
from cronos.keys import Keys
from cronos.logs import bind
from cronos.messages import RunToken
from cronos.models import SKIP_OVERLAP
from cronos.store.runs import ClaimedRun, Outcome, RunStore
from cronos.stream import Delivery
from executor import kinds
from executor.batcher import Batcher, Withdrawn

log = logging.getLogger("cronos.executor")
T = TypeVar("T")

SKIPPED = "skipped"
DRAIN_CANCELLED = "cancelled: executor shutting down"
# A run's error and traceback are bounded like its result: user code controls their size.
MAX_ERROR_BYTES = 4096
MAX_TRACEBACK_BYTES = 32_768


@dataclass(frozen=True, slots=True)
class Settle:
    """Step 6 for one token: release its lock (if taken), then acknowledge its entry
    (None: leave it pending, for a token this executor gives back unclaimed)."""

    lock_key: str | None
    entry_id: bytes | None


@dataclass(eq=False)
class InFlight:
    """A claimed run while it executes; the heartbeat and the drain act on it.

    The work runs inline in the token's own task (no extra task per run): `cancel` cancels
    that task only while `working`, and `run_under_timeout` turns the cancellation back
    into an outcome.
    """

    run: ClaimedRun
    lock_key: str
    entry_id: bytes
    task: asyncio.Task[Any] | None = None  # set only while the work runs
    cancel_reason: str | None = None
    lost: bool = False  # ownership went elsewhere: cancel, report nothing

    @property
    def working(self) -> bool:
        return self.task is not None

    def cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
        task, self.task = self.task, None  # one cancellation at most
        if task is not None:
            task.cancel()


@dataclass(eq=False)
class Deps:
    """Everything the pipeline touches, built once by the service."""

    node_id: str
    keys: Keys
    lease_s: float
    env: kinds.Env
    store: RunStore
    locks: Batcher[str, bool]
    claims: Batcher[int, ClaimedRun | str | None]
    finishes: Batcher[Outcome, bool]
    settles: Batcher[Settle, None]
    lead_ms: int = 0  # how far ahead of its due time a tick lock is taken (its ttl covers it)
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    on_trouble: list[str] = field(default_factory=list)  # backends that failed since the consumer looked


async def process(delivery: Delivery, deps: Deps) -> str:
    """Take one token through steps 1-6; returns what happened to it (for tests and counts)."""
    token = delivery.token
    if token is None:  # undecodable entry: nothing to run, do not let it block the group
        await settle(deps, None, delivery.entry_id)
        return "malformed"
    with bind(
        job_id=token.job_id,
        run_id=token.run_id,
        attempt=token.attempt,
        epoch=token.epoch,
        scheduled_for=_iso(token.scheduled_for_ms),
    ):
        try:
            lock_key = deps.keys.tick_lock(token.job_id, token.scheduled_for_ms, token.attempt)
            # Pushed ahead of its due time: locked no earlier than the lock's ttl covers (the
            # lead), claimed at the due instant together with every token due then.
            due_ms = _due_ms(token)
            lock_at = None if due_ms is None else due_ms - deps.lead_ms
            try:
                if not await take_tick_lock(deps, lock_key, lock_at):  # step 1
                    await settle(deps, None, delivery.entry_id)
                    return "lock_denied"
                claim = await claim_run(deps, token, due_ms)  # steps 2 and 3
            except Withdrawn:
                # The drain deadline came first: given back unclaimed, its entry left pending.
                await settle(deps, lock_key, None)  # compare-and-delete: only if the lock is ours
                log.info("token given back unclaimed", extra={"event": "token.given_back"})
                return "given_back"
            if not isinstance(claim, ClaimedRun):
                await settle(deps, lock_key, delivery.entry_id)
                return claim or "not_queued"
            flight = InFlight(claim, lock_key, delivery.entry_id)
            deps.in_flight[claim.id] = flight
            try:
                outcome = await run_under_timeout(deps, flight)  # step 4
                state = await record(deps, flight, outcome)  # step 5
            finally:
                deps.in_flight.pop(claim.id, None)
            await settle(deps, lock_key, delivery.entry_id)  # step 6
            return state
        except BackendUnavailable as exc:
            # The token stays pending: XAUTOCLAIM hands it out again once it has idled.
            deps.on_trouble.append(exc.backend)
            log.warning("token left pending: %s", exc, extra={"event": "token.deferred"})
            return "deferred"


def _due_ms(token: RunToken) -> int | None:
    """When the token may be claimed: the wall clock's ms after its due time (due_ms is the
    floor of a due time that may have a fraction of a ms), never before its tick."""
    if token.due_ms is None:
        return None  # from a leader that pushes when due
    due_ms = max(token.due_ms, token.scheduled_for_ms) + 1
    return due_ms if time.time() * 1000 < due_ms else None


async def take_tick_lock(deps: Deps, lock_key: str, not_before_ms: int | None = None) -> bool:
    """Step 1: `SET lock NX PX lease`; denied means another executor has this tick."""
    granted = await _redis(deps.locks.submit(lock_key, not_before_ms))
    _counter(metrics.LOCK_ACQUISITIONS, lock="tick", result="granted" if granted else "denied").inc()
    if not granted:
        log.info("tick lock held by another executor", extra={"event": "token.lock_denied"})
    return granted


async def claim_run(deps: Deps, token: RunToken, not_before_ms: int | None = None) -> ClaimedRun | str | None:
    """Steps 2-3: the conditional claim (at `not_before_ms` at the earliest, in one statement
    with everything due then); the job's concurrency policy decides overlaps."""
    claim = await deps.claims.submit(token.run_id, not_before_ms)
    if claim == SKIPPED:
        _counter(metrics.RUNS_SKIPPED, reason=SKIP_OVERLAP).inc()
        log.info("tick skipped: previous run still running", extra={"event": "run.skipped"})
    elif claim is None:
        log.debug("run not queued any more", extra={"event": "token.not_queued"})
    return claim


async def run_under_timeout(deps: Deps, flight: InFlight) -> Outcome | None:
    """Step 4: run the work under the job's timeout. None when ownership was lost."""
    run = flight.run
    delay = (run.started_at - run.scheduled_for).total_seconds()
    metrics.RUN_START_DELAY.observe(max(delay, 0.0))
    metrics.RUNS_IN_FLIGHT.inc()
    log.info("run started", extra={"event": "run.started", "kind": run.kind, "start_delay_s": round(delay, 4)})
    started = time.monotonic()
    task = asyncio.current_task()
    result: str | None = None
    failure: BaseException | None = None
    try:
        flight.task = task
        async with asyncio.timeout(run.timeout_s) as deadline:
            result = await kinds.execute(run, deps.env)
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
        flight.task = None
        metrics.RUNS_IN_FLIGHT.dec()
    if flight.lost:
        return None
    return _outcome(deps, flight, result, failure, (time.monotonic() - started) * 1000)


def _outcome(
    deps: Deps, flight: InFlight, result: str | None, failure: BaseException | None, duration_ms: float
) -> Outcome:
    run = flight.run
    if failure is None:
        return Outcome(run_id=run.id, node_id=deps.node_id, state="completed", result=result, duration_ms=duration_ms)
    trace: str | None = None
    if isinstance(failure, asyncio.CancelledError):
        error = flight.cancel_reason or DRAIN_CANCELLED
    else:
        trace = kinds.excerpt("".join(traceback.format_exception(failure)), MAX_TRACEBACK_BYTES)
        error = failure.message if isinstance(failure, kinds.RunFailed) else f"{type(failure).__name__}: {failure}"
        error = kinds.excerpt(error, MAX_ERROR_BYTES) or ""
        result = failure.result if isinstance(failure, kinds.RunFailed) else None
    return Outcome(
        run_id=run.id,
        node_id=deps.node_id,
        state="failed",
        error=error,
        traceback=trace,
        result=result,
        duration_ms=duration_ms,
        retry_delay_s=retry.planned_delay_s(run.attempt, run.max_retries, run.retry_backoff_s),
    )


async def record(deps: Deps, flight: InFlight, outcome: Outcome | None) -> str:
    """Step 5: write the outcome while still owning the run; kept and retried while PostgreSQL is away."""
    run = flight.run
    if outcome is None:
        log.warning("run taken over by another node: reporting nothing", extra={"event": "run.lost"})
        return "lost"
    backoff: Backoff | None = None  # made on the first failure: a Backoff seeds an RNG
    while True:
        try:
            # Once submitted, the write goes out with its batch even if this task is cancelled.
            written = await deps.finishes.submit(outcome)
            break
        except BackendUnavailable as exc:
            deps.on_trouble.append(exc.backend)
            log.warning("result not written yet, will retry: %s", exc, extra={"event": "run.record_deferred"})
            backoff = backoff or Backoff(base_s=0.1, cap_s=5.0)
            await asyncio.sleep(backoff.next_delay())
    if not written:
        log.warning("run taken over before its result was written: reporting nothing", extra={"event": "run.lost"})
        return "lost"
    _counter(metrics.RUNS, state=outcome.state, kind=run.kind).inc()
    _counter(metrics.RUN_DURATION, kind=run.kind).observe((outcome.duration_ms or 0) / 1000)
    fields: dict[str, object] = {"kind": run.kind, "duration_ms": round(outcome.duration_ms or 0, 2)}
    if outcome.state == "completed":
        log.info("run completed", extra={"event": "run.completed", **fields})
    else:
        fields.update(error=outcome.error, retry_in_s=outcome.retry_delay_s)
        log.warning("run failed: %s", outcome.error, extra={"event": "run.failed", **fields})
    return outcome.state


async def settle(deps: Deps, lock_key: str | None, entry_id: bytes | None) -> None:
    """Step 6: release the tick lock (compare-and-delete), then XACK. Retried a little; the
    lock expires on its own and an unacknowledged entry is reclaimed and found finished."""
    backoff: Backoff | None = None
    for attempt in range(5):
        try:
            await _redis(deps.settles.submit(Settle(lock_key, entry_id)))
            return
        except BackendUnavailable as exc:
            if attempt == 4:
                deps.on_trouble.append(exc.backend)
                log.warning("could not release/acknowledge: %s", exc, extra={"event": "token.settle_failed"})
                return
            backoff = backoff or Backoff(base_s=0.05, cap_s=1.0)
            await asyncio.sleep(backoff.next_delay())


async def _redis(awaitable: Awaitable[T]) -> T:
    """Await a Redis-backed step, turning connection failures into BackendUnavailable."""
    try:
        return await awaitable
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise BackendUnavailable("redis", f"{type(exc).__name__}: {exc}") from exc


@functools.cache
def _child(metric: Any, labels: tuple[tuple[str, str], ...]) -> Any:
    return metric.labels(**dict(labels))


def _counter(metric: Any, **labels: str) -> Any:
    """The labelled child of a metric, looked up once (labels() costs more than inc())."""
    return _child(metric, tuple(sorted(labels.items())))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()
