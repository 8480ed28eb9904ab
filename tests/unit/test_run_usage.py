"""What a run used (cronos.run_usage): the launcher's line read, a task's CPU metered by its own
steps, and the per-job histograms bounded (executor.usage_metrics)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from cronos import metrics
from cronos.run_usage import Meter, Usage
from executor.kinds.shell import read_rusage
from executor.kinds.task import metered
from executor.usage_metrics import JobUsage


def test_the_launchers_line_fills_the_meter_and_another_line_leaves_it_empty() -> None:
    meter = Meter()
    read_rusage("usage 0.250000 0.050000 65536", meter)
    assert meter.usage(1.5) == Usage(
        wall_ms=1500.0, cpu_ms=300.0, cpu_user_ms=250.0, cpu_sys_ms=50.0, max_rss_bytes=64 * 1024 * 1024
    )
    for line in ("", "usage 1 2", "usage a b c", "exit 0"):
        empty = Meter()
        read_rusage(line, empty)
        assert empty.usage(0.001) == Usage(wall_ms=1.0)


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def test_an_async_tasks_cpu_is_its_steps_and_what_it_returns_and_raises_passes_through() -> None:
    async def work(payload: dict[str, Any], ctx: Any) -> str:
        _spin(0.02)
        await asyncio.sleep(0.1)  # the loop runs another coroutine's spin meanwhile: not counted here
        _spin(0.02)
        if payload.get("fail"):
            raise ValueError("boom")
        return "done"

    spun: list[float] = []

    async def neighbour() -> None:
        await asyncio.sleep(0.01)
        started = time.perf_counter()
        _spin(0.15)
        spun.append(time.perf_counter() - started)

    meter = Meter()
    started = time.perf_counter()
    result, _ = await asyncio.gather(metered(work, meter)({}, None), neighbour())
    elapsed = time.perf_counter() - started
    assert result == "done" and meter.cpu_s is not None and meter.cpu_s >= 0.04, meter
    assert meter.cpu_s < elapsed - spun[0] + 0.005, (meter, elapsed, spun)  # none of the neighbour's time
    failing = Meter()
    with pytest.raises(ValueError, match="boom"):
        await metered(work, failing)({"fail": True}, None)
    assert failing.cpu_s is not None and failing.cpu_s >= 0.04


async def test_a_cancelled_async_task_sees_the_cancel_and_its_cpu_so_far_is_kept() -> None:
    seen: list[str] = []

    async def work(payload: dict[str, Any], ctx: Any) -> None:
        _spin(0.02)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    meter = Meter()
    task = asyncio.ensure_future(metered(work, meter)({}, None))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"] and meter.cpu_s is not None and meter.cpu_s >= 0.02


def test_a_plain_tasks_cpu_is_its_threads() -> None:
    meter = Meter()
    assert metered(lambda payload, ctx: _spin(0.03) or "ok", meter)({}, None) == "ok"
    assert meter.cpu_s is not None and meter.cpu_s >= 0.03


def _count(name: str, job: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, {"job_name": job})


def test_per_job_series_go_to_the_first_jobs_allowed_up_to_the_cap() -> None:
    series = JobUsage(2, ["unit-usage-*"])
    dropped = metrics.REGISTRY.get_sample_value("cronos_job_run_usage_dropped_total") or 0.0
    shell = Usage(wall_ms=2000, cpu_ms=1500, cpu_user_ms=1000, cpu_sys_ms=500, max_rss_bytes=64 << 20)
    series.observe("unit-usage-a", shell)
    series.observe("unit-usage-b", Usage(wall_ms=10, cpu_ms=1))
    series.observe("unit-usage-a", Usage(wall_ms=5))  # an http run: wall time only
    series.observe("unit-usage-c", shell)  # past the cap
    series.observe("elsewhere", shell)  # not allowed: not counted as dropped either
    assert _count("cronos_job_run_wall_seconds_count", "unit-usage-a") == 2
    assert _count("cronos_job_run_cpu_seconds_sum", "unit-usage-a") == 1.5
    assert _count("cronos_job_run_max_rss_bytes_count", "unit-usage-a") == 1
    assert _count("cronos_job_run_max_rss_bytes_count", "unit-usage-b") is None  # no memory measured: no series
    assert _count("cronos_job_run_wall_seconds_count", "unit-usage-c") is None
    assert _count("cronos_job_run_wall_seconds_count", "elsewhere") is None
    assert metrics.REGISTRY.get_sample_value("cronos_job_run_usage_dropped_total") == dropped + 1
