"""The @cronos.task registry, the run context and the built-in tasks."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

import cronos
from cronos import tasks


def _ctx() -> cronos.RunContext:
    return cronos.RunContext(
        job_id=7,
        run_id=42,
        scheduled_for=datetime(2030, 1, 1, 12, tzinfo=UTC),
        attempt=2,
        logger=logging.getLogger("t"),
    )


def test_idempotency_key_is_job_and_tick() -> None:
    assert _ctx().idempotency_key == "7:2030-01-01T12:00:00+00:00"


def test_decorator_registers_and_returns_the_function() -> None:
    @cronos.task("unit.reindex")
    async def reindex(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
        return f"{payload['target']}@{ctx.attempt}"

    try:
        assert tasks.lookup("unit.reindex") is reindex
        assert "unit.reindex" in tasks.registered()
    finally:
        tasks.unregister("unit.reindex")
    assert tasks.lookup("unit.reindex") is None


def test_duplicate_names_are_refused_unless_replacing() -> None:
    @cronos.task("unit.dup")
    def first(payload: dict[str, Any], ctx: cronos.RunContext) -> None: ...

    def second(payload: dict[str, Any], ctx: cronos.RunContext) -> None: ...

    try:
        with pytest.raises(ValueError, match="already registered"):
            cronos.task("unit.dup")(second)
        assert tasks.lookup("unit.dup") is first
        cronos.task("unit.dup", replace=True)(second)
        assert tasks.lookup("unit.dup") is second
    finally:
        tasks.unregister("unit.dup")


def test_bad_names_are_refused() -> None:
    with pytest.raises(ValueError):
        cronos.task("")
    with pytest.raises(ValueError):
        cronos.task("x" * 201)


async def test_async_tasks_run_on_the_loop_and_sync_ones_in_a_thread() -> None:
    async def coro(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
        return threading.current_thread().name

    def plain(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
        return threading.current_thread().name

    assert await tasks.call(coro, {}, _ctx()) == "MainThread"
    assert await tasks.call(plain, {}, _ctx()) != "MainThread"


async def test_builtins() -> None:
    noop, sleep = tasks.lookup("noop"), tasks.lookup("sleep")
    assert noop is not None and sleep is not None
    assert await tasks.call(noop, {"action": "noop"}, _ctx()) is None
    assert await tasks.call(sleep, {"action": "sleep", "seconds": 0.01}, _ctx()) == {"slept_s": 0.01}
    with pytest.raises(ValueError, match="seconds"):
        await tasks.call(sleep, {"action": "sleep", "seconds": -1}, _ctx())


# --- stopping (issue 24, item 6): the deadline, the cancellation signal, a thread waited for ---


def test_the_cancellation_signal_is_seen_from_the_loop_and_from_a_thread() -> None:
    ctx = _ctx()
    assert not ctx.cancelled.is_set() and not ctx.is_cancelled() and ctx.deadline is None
    seen: list[bool] = []
    ctx.cancellation.set("cancelled by ops")
    ctx.cancellation.set("cancelled by someone else")  # the first reason stays
    thread = threading.Thread(target=lambda: seen.append(ctx.is_cancelled()))
    thread.start()
    thread.join()
    assert seen == [True] and ctx.cancelled.is_set() and ctx.cancellation.reason == "cancelled by ops"


async def test_a_cancelled_call_waits_for_its_thread_then_raises() -> None:
    """A plain function cannot be interrupted: the call, cancelled (twice even), returns only once
    its thread has, told the work to stop meanwhile, and reported the overrun on both sides."""
    release = threading.Event()
    told: list[bool] = []
    overrun: list[bool] = []

    def stubborn(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
        release.wait(10)
        told.append(ctx.is_cancelled())
        return "late"

    call = asyncio.ensure_future(tasks.call(stubborn, {}, _ctx(), on_overrun=overrun.append))
    await asyncio.sleep(0.05)
    call.cancel()
    await asyncio.sleep(0.05)
    call.cancel()  # a second cancellation (a drain after a timeout) does not end the wait either
    await asyncio.sleep(0.05)
    assert not call.done() and overrun == [True]
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert told == [True] and overrun == [True, False]


async def test_the_built_in_sleep_returns_when_cancelled() -> None:
    ctx = _ctx()
    asyncio.get_running_loop().call_later(0.05, ctx.cancellation.set, "cancelled by ops")
    slept = await tasks.call(tasks.sleep, {"action": "sleep", "seconds": 30}, ctx)
    assert 0.04 <= slept["slept_s"] < 5
