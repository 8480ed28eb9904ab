"""The public API for user task code: the `@cronos.task` registry and the run context.

    import cronos

    @cronos.task("reindex")
    async def reindex(payload: dict, ctx: cronos.RunContext) -> dict:
        ...

A `task` job's `payload.action` selects the function. Async functions run on the
executor's loop; plain functions run in a worker thread. Whatever the function returns
is stored (JSON, bounded) as the run's result excerpt.

Stopping. `ctx.deadline` is when the job's timeout ends the run; `ctx.cancelled` (an
asyncio.Event) and `ctx.is_cancelled()` (for a plain function, from its thread) tell that
someone cancelled the run: the task should return soon, before the executor's grace ends and
it cancels the task. An async task is cancelled at its timeout or after that grace. A thread
cannot be: a plain function past its timeout or its grace keeps its run `running` (logged as
overrunning) and its execution slot, and, for an exclusive job, its job's slot, until it
returns; only then is the run recorded (failed "timed out", or cancelled). So two attempts of a
`forbid` job never overlap, whatever the function does.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, KeysView
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

TaskFn = Callable[[dict[str, Any], "RunContext"], Any]
F = TypeVar("F", bound=TaskFn)

_registry: dict[str, TaskFn] = {}


class Cancellation:
    """A run's cancellation signal: set once, by the executor on its loop; read from the loop
    (`event`, made on first use: a run nobody cancels and no task waits on costs nothing) or from
    any thread (`is_set`: one attribute, written once)."""

    __slots__ = ("_event", "reason")

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self.reason: str | None = None  # set: cancelled (the first reason given stays)

    @property
    def event(self) -> asyncio.Event:
        if self._event is None:
            self._event = asyncio.Event()
            if self.reason is not None:
                self._event.set()
        return self._event

    def set(self, reason: str) -> None:
        """On the executor's loop: tell the work it should stop (`reason`: "cancelled by ...")."""
        if self.reason is None:
            self.reason = reason
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        return self.reason is not None


@dataclass(frozen=True, slots=True)
class RunContext:
    """What a task knows about the run executing it."""

    job_id: int
    run_id: int
    scheduled_for: datetime  # aware UTC
    attempt: int
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
    deadline: datetime | None = None  # aware UTC: the run's start plus its job's timeout
    cancellation: Cancellation = field(default_factory=Cancellation)
    # The run's W3C traceparent while traces are on (docs/tracing.md), else None: send it on to
    # the services the task calls, and their spans join the run's trace.
    traceparent: str | None = None

    @property
    def cancelled(self) -> asyncio.Event:
        """Set when someone cancelled the run (await `ctx.cancelled.wait()` in an async task)."""
        return self.cancellation.event

    def is_cancelled(self) -> bool:
        """Whether someone cancelled the run; safe from a plain function's thread."""
        return self.cancellation.is_set()

    @property
    def idempotency_key(self) -> str:
        """`<job_id>:<scheduled_for ISO>`: the same for every attempt of one tick."""
        return idempotency_key(self.job_id, self.scheduled_for)


def idempotency_key(job_id: int, scheduled_for: datetime) -> str:
    return f"{job_id}:{scheduled_for.isoformat()}"


def task(name: str, *, replace: bool = False) -> Callable[[F], F]:
    """Register a function under `name` (a `task` job's `payload.action`)."""
    if not name or len(name) > 200:
        raise ValueError("task name must be 1 to 200 characters")

    def register(fn: F) -> F:
        if name in _registry and _registry[name] is not fn and not replace:
            raise ValueError(f"a task named {name!r} is already registered")
        _registry[name] = fn
        return fn

    return register


def lookup(name: str) -> TaskFn | None:
    return _registry.get(name)


def registered() -> list[str]:
    return sorted(_registry)


def names() -> KeysView[str]:
    """The registered names, as a live view (an executor's capability: cronos.presence)."""
    return _registry.keys()


def unregister(name: str) -> None:
    """Remove a registration (tests)."""
    _registry.pop(name, None)


Overrun = Callable[[bool], None]  # told True when a cancelled thread runs on, False when it returned


async def call(fn: TaskFn, payload: dict[str, Any], ctx: RunContext, on_overrun: Overrun | None = None) -> Any:
    """Run `fn`: awaited when async, in a thread when not. A thread cannot be interrupted: when
    this call is cancelled (a timeout, a cancel's grace, a drain) it signals `ctx`, waits for the
    thread to return (`on_overrun` told meanwhile), then raises CancelledError."""
    if inspect.iscoroutinefunction(fn):
        return await fn(payload, ctx)
    thread = asyncio.ensure_future(asyncio.to_thread(fn, payload, ctx))
    try:
        result = await asyncio.shield(thread)
    except asyncio.CancelledError:
        await _join(thread, ctx, on_overrun)
        raise
    if inspect.isawaitable(result):
        return await _await(result)
    return result


async def _join(thread: asyncio.Future[Any], ctx: RunContext, on_overrun: Overrun | None) -> None:
    """Wait for a cancelled call's thread to return, through further cancellations (each only
    repeats what the first asked); its result or exception is dropped: the run ends as cancelled."""
    if thread.done():
        return
    ctx.cancellation.set("cancelled")  # keeps the reason of a cancel already signalled
    if on_overrun is not None:
        on_overrun(True)
    try:
        while not thread.done():
            try:
                await asyncio.shield(thread)
            except asyncio.CancelledError:
                continue
            except Exception:  # noqa: BLE001 - its failure no longer decides the run
                continue
    finally:
        if thread.done() and not thread.cancelled():
            thread.exception()  # retrieved: no "exception was never retrieved" at collection
        if on_overrun is not None:
            on_overrun(False)


async def _await(value: Awaitable[Any]) -> Any:
    return await value


# --- built-ins, for tests and benchmarks ---


@task("noop")
async def noop(payload: dict[str, Any], ctx: RunContext) -> None:
    return None


@task("sleep")
async def sleep(payload: dict[str, Any], ctx: RunContext) -> dict[str, float]:
    """Sleeps `payload.seconds`, or until the run is cancelled (then returns at once)."""
    seconds = float(payload.get("seconds", 1))
    if seconds < 0:
        raise ValueError("payload.seconds must be >= 0")
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with asyncio.timeout(seconds):
            await ctx.cancelled.wait()
    except TimeoutError:
        return {"slept_s": seconds}
    return {"slept_s": round(loop.time() - started, 3)}
