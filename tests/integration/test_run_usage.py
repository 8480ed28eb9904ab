"""Run usage (cronos/run_usage.py) measured by a real executor and kept with the run: a shell
child's rusage, a task's own CPU time (not its neighbours' on the loop), an http run's wall time;
shown in the run's JSON and exported as per-job histograms."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import msgspec
from aiohttp import web

import cronos
from cronos import metrics
from cronos.run_usage import Usage
from cronos.settings import Settings
from cronos.store import run_usage
from executor.service import Executor
from tests.integration.api_client import running_api
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness

MIB = 1024 * 1024
# A child that holds 64 MiB it wrote (resident, not merely mapped) and burns 0.4 s of CPU.
HUNGRY = (
    "import time\n"
    "held = b'x' * (64 * 1024 * 1024)\n"
    "end = time.process_time() + 0.4\n"
    "while time.process_time() < end:\n"
    "    pass\n"
)


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@cronos.task("test.burn_async", replace=True)
async def _burn_async(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    """Burns CPU on the loop in steps, sleeping between them (other runs run meanwhile)."""
    for _ in range(4):
        _burn(0.05)
        await asyncio.sleep(0.05)


@cronos.task("test.idle_async", replace=True)
async def _idle_async(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    await asyncio.sleep(0.6)  # runs while test.burn_async burns: none of that is its CPU


@cronos.task("test.burn_sync", replace=True)
def _burn_sync(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    _burn(0.2)


async def usage_of(harness: Harness, job: int) -> Usage:
    (run,) = await harness.runs(job)
    assert run.state == "completed", run.error
    usage = await run_usage.of_run(harness.pool, run.id, run.scheduled_for)
    assert usage is not None
    return usage


def _sample(name: str, job_name: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, {"job_name": job_name})


async def test_a_shell_runs_cpu_and_peak_memory_are_its_childs(harness: Harness, settings: Settings) -> None:
    job = await harness.job(kind="shell", payload={"argv": [sys.executable, "-c", HUNGRY]})
    await harness.queue(job)
    async with Executor(msgspec.structs.replace(settings, allow_shell=True)) as ex:
        assert await ex.run_once() == {"completed": 1}
    usage = await usage_of(harness, job)
    assert usage.max_rss_bytes is not None and 64 * MIB <= usage.max_rss_bytes < 512 * MIB, usage
    assert usage.cpu_ms is not None and usage.cpu_user_ms is not None and usage.cpu_sys_ms is not None
    assert usage.cpu_ms >= 400, usage  # what the child burned, at least
    assert abs(usage.cpu_ms - (usage.cpu_user_ms + usage.cpu_sys_ms)) < 0.01
    assert usage.wall_ms >= usage.cpu_ms * 0.9, usage  # one thread: its CPU fits in its wall time

    async with running_api(settings) as api:
        (run,) = await harness.runs(job)
        shown = await api.call("GET", f"/api/runs/{run.id}")
    assert shown.status == 200 and shown.body["usage"] == msgspec.to_builtins(usage)


async def test_a_tasks_cpu_is_its_own_steps_not_its_neighbours(harness: Harness, settings: Settings) -> None:
    burning = await harness.job(payload={"action": "test.burn_async"})
    idle = await harness.job(payload={"action": "test.idle_async"})
    threaded = await harness.job(payload={"action": "test.burn_sync"})
    for job in (burning, idle, threaded):
        await harness.queue(job)
    async with Executor(settings) as ex:
        assert await ex.run_once() == {"completed": 3}
    burnt, slept = await usage_of(harness, burning), await usage_of(harness, idle)
    thread = await usage_of(harness, threaded)
    assert burnt.cpu_ms is not None and 200 <= burnt.cpu_ms < burnt.wall_ms, burnt
    assert slept.cpu_ms is not None and slept.cpu_ms < 50 and slept.wall_ms >= 600, slept  # the burn was not its
    assert thread.cpu_ms is not None and thread.cpu_ms >= 200, thread
    assert (burnt.max_rss_bytes, burnt.cpu_user_ms, thread.max_rss_bytes) == (None, None, None)  # shell runs only


async def test_an_http_runs_usage_is_its_wall_time(harness: Harness, settings: Settings) -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.2)
        return web.Response(text="ok")

    runner, port = await serve(handle, "127.0.0.1")
    try:
        job = await harness.job(kind="http", payload={"url": f"http://127.0.0.1:{port}/slow"})
        await harness.queue(job)
        async with Executor(settings) as ex:
            assert await ex.run_once() == {"completed": 1}
    finally:
        await runner.cleanup()
    usage = await usage_of(harness, job)
    assert usage.wall_ms >= 200 and usage.cpu_ms is None and usage.max_rss_bytes is None, usage


async def test_usage_is_exported_per_job_and_capped(harness: Harness, settings: Settings) -> None:
    names = []
    for _ in range(3):
        job = await harness.job(payload={"action": "test.burn_sync"})
        names.append(str(await harness.pool.fetchval("SELECT name FROM jobs WHERE id = $1", job)))
        await harness.queue(job)
    dropped = metrics.REGISTRY.get_sample_value("cronos_job_run_usage_dropped_total") or 0.0
    async with Executor(msgspec.structs.replace(settings, job_metrics_max=2)) as ex:
        assert await ex.run_once() == {"completed": 3}
    counted = [_sample("cronos_job_run_cpu_seconds_count", name) for name in names]
    assert sorted(counted, key=lambda c: c is None) == [1.0, 1.0, None], counted  # two jobs have series
    assert (metrics.REGISTRY.get_sample_value("cronos_job_run_usage_dropped_total") or 0.0) == dropped + 1
    exported = [name for name, count in zip(names, counted, strict=True) if count is not None]
    assert all((_sample("cronos_job_run_wall_seconds_count", name) or 0) == 1 for name in exported)
    assert _sample("cronos_job_run_max_rss_bytes_count", exported[0]) is None  # a task: no memory series
