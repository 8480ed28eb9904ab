"""The @cronos.task registry, the run context and the built-in tasks."""

from __future__ import annotations

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
