"""`task` runs: the function registered under `payload.action` with `@cronos.task`.

A plain function runs in a thread, which nothing can interrupt: cancelled (its timeout, a cancel's
grace, a drain), it keeps its run running until it returns (cronos.tasks.call), reported here as
overrunning (a warning, the cronos_runs_overrunning gauge).

CPU time (cronos.run_usage): a plain function's is its worker thread's CPU clock, from its call
to its return; an async function's is the time its own steps held the event loop (each `send`
into its coroutine timed, by the loop's monotonic clock: a thread CPU clock read is a system call,
twice a step, on the loop every run shares), so what other runs do on the loop meanwhile is not
counted. Work it hands to another thread, process or asyncio task is not counted either.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import msgspec

from cronos import metrics, tasks, traces
from cronos.run_usage import Meter
from cronos.store.runs import ClaimedRun
from cronos.tasks import Cancellation, TaskFn
from executor.kinds.base import Env, RunFailed, excerpt

log = logging.getLogger("cronos.task")


async def run(run: ClaimedRun, env: Env, cancellation: Cancellation, meter: Meter) -> str | None:
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
    if _is_async(fn):  # awaited here, as tasks.call would, its steps timed
        value = await _Steps(fn(dict(run.payload), ctx), meter)
    else:
        value = await tasks.call(_threaded(fn, meter), dict(run.payload), ctx, on_overrun=_overrun)
    if value is None:
        return None
    if isinstance(value, str | bytes):
        return excerpt(value, env.settings.result_max_bytes)
    try:
        encoded = msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError):
        encoded = repr(value).encode()
    return excerpt(encoded, env.settings.result_max_bytes)


def metered(fn: TaskFn, meter: Meter) -> TaskFn:
    """`fn`, its CPU time put in `meter` as it runs (async stays async, plain stays plain)."""
    if _is_async(fn):

        async def stepped(payload: dict[str, Any], ctx: tasks.RunContext) -> Any:
            return await _Steps(fn(payload, ctx), meter)

        return stepped
    return _threaded(fn, meter)


@functools.lru_cache(maxsize=1024)
def _is_async(fn: TaskFn) -> bool:
    """inspect.iscoroutinefunction, asked once per function: it costs microseconds a run."""
    return inspect.iscoroutinefunction(fn)


def _threaded(fn: TaskFn, meter: Meter) -> TaskFn:
    def threaded(payload: dict[str, Any], ctx: tasks.RunContext) -> Any:
        started = time.thread_time()
        try:
            return fn(payload, ctx)
        finally:
            meter.cpu_s = time.thread_time() - started

    return threaded


class _Steps:
    """Awaits a coroutine as `await` would, timing each of its steps (the time it holds the loop)."""

    __slots__ = ("_coro", "_meter")

    def __init__(self, coro: Any, meter: Meter) -> None:
        self._coro, self._meter = coro, meter

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, clock = self._coro, time.perf_counter
        spent = 0.0
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                started = clock()
                try:
                    signal = coro.send(value) if error is None else coro.throw(error)
                except StopIteration as stop:
                    return stop.value
                finally:
                    spent += clock() - started
                value, error = None, None
                try:
                    value = yield signal
                except GeneratorExit:
                    coro.close()
                    raise
                except BaseException as exc:  # noqa: BLE001 - thrown in (a cancel): the coroutine's to handle
                    error = exc
        finally:  # once, however it ends (returned, raised, cancelled, closed)
            self._meter.cpu_s = spent


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
