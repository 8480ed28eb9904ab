"""The public API for user task code: the `@cronos.task` registry and the run context.

    import cronos

    @cronos.task("reindex")
    async def reindex(payload: dict, ctx: cronos.RunContext) -> dict:
        ...

A `task` job's `payload.action` selects the function. Async functions run on the
executor's loop; plain functions run in a worker thread. Whatever the function returns
is stored (JSON, bounded) as the run's result excerpt.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

TaskFn = Callable[[dict[str, Any], "RunContext"], Any]
F = TypeVar("F", bound=TaskFn)

_registry: dict[str, TaskFn] = {}


@dataclass(frozen=True, slots=True)
class RunContext:
    """What a task knows about the run executing it."""

    job_id: int
    run_id: int
    scheduled_for: datetime  # aware UTC
    attempt: int
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]

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


def unregister(name: str) -> None:
    """Remove a registration (tests)."""
    _registry.pop(name, None)


async def call(fn: TaskFn, payload: dict[str, Any], ctx: RunContext) -> Any:
    """Run `fn`: awaited when async, in a thread when not (a thread cannot be interrupted)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(payload, ctx)
    result = await asyncio.to_thread(fn, payload, ctx)
    if inspect.isawaitable(result):
        return await _await(result)
    return result


async def _await(value: Awaitable[Any]) -> Any:
    return await value


# --- built-ins, for tests and benchmarks ---


@task("noop")
async def noop(payload: dict[str, Any], ctx: RunContext) -> None:
    return None


@task("sleep")
async def sleep(payload: dict[str, Any], ctx: RunContext) -> dict[str, float]:
    seconds = float(payload.get("seconds", 1))
    if seconds < 0:
        raise ValueError("payload.seconds must be >= 0")
    await asyncio.sleep(seconds)
    return {"slept_s": seconds}
