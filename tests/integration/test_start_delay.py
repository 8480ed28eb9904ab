"""One start delay everywhere (issue 23, item 4): started_at - scheduled_for (the tick), in the
runs API, the console's jobs overview and ticks, the CLI and the metrics; beside it, named the
same everywhere, what was held back on purpose (due_at - scheduled_for) and what was waited once
due (started_at - due_at).

A catch-up run on a real executor, PostgreSQL and Redis: its tick is held back 1.5 s (the pace
the leader spreads a catch-up at; a retry's backoff looks the same), and its token reaches the
stream 0.3 s after it is due. Before the fix the console's runs table and jobs page measured
from due_at (~0.3 s where the CLI said ~1.8 s), and nothing showed the two parts.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import asyncpg
import msgspec
import pytest
import redis.asyncio as aioredis

import cronos
from cronos import metrics
from cronos.cli import _parser
from cronos.client.jobs_cli import run_command
from cronos.keys import Keys
from cronos.settings import Settings
from cronos.stream import RunStream
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.ledger_helpers import Harness, insert_job, insert_run
from tests.waiting import wait_for

HELD_BACK = timedelta(seconds=1.5)
LATE = timedelta(seconds=0.3)  # the token pushed this long after the run is due


@cronos.task("test.delay.nap", replace=True)
async def _nap(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    await asyncio.sleep(payload["seconds"])


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


def _sum(histogram: Any) -> float:
    return float(histogram.series()[-1])


async def _now_past(instant: datetime) -> bool:
    return datetime.now(UTC) > instant


async def _ended(pool: asyncpg.Pool, run_id: int) -> bool:
    return await pool.fetchval("SELECT state FROM runs WHERE id = $1", run_id) == "completed"


async def test_api_cli_console_and_metric_show_one_start_delay_and_its_parts(
    api: Api,
    settings: Settings,
    pg_pool: asyncpg.Pool,
    redis_client: aioredis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    job = await api.create(name="catching-up", cron_expression="* * * * * *", payload={"action": "noop"})
    created = datetime.fromisoformat(job["created_at"])
    tick = created.replace(microsecond=0) + timedelta(seconds=1)  # a tick of the job, after its creation
    due = tick + HELD_BACK
    token = await insert_run(pg_pool, job["id"], tick, due_at=due)
    await pg_pool.execute("UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", job["id"], tick)
    stream = RunStream(redis_client, Keys(settings.key_prefix))
    await stream.ensure_group()

    before = {name: _sum(h) for name, h in _histograms().items()}
    async with Executor(settings) as executor:
        task = asyncio.create_task(executor.run())
        try:
            await wait_for(lambda: _now_past(due + LATE), timeout=10, what="the run due, and then some")
            await stream.publish([token])
            await wait_for(lambda: _ended(pg_pool, token.run_id), timeout=10, what="the run completed")
        finally:
            executor.stop()
            await asyncio.wait_for(task, 10)
    observed = {name: _sum(h) - before[name] for name, h in _histograms().items()}

    run = (await api.call("GET", f"/api/runs/{token.run_id}")).body
    started = datetime.fromisoformat(run["started_at"])
    delay_ms = (started - tick).total_seconds() * 1000
    waited_ms = (started - due).total_seconds() * 1000
    assert delay_ms >= (HELD_BACK + LATE).total_seconds() * 1000, run
    # The runs API: the start delay from the tick, and its two parts, which add up to it.
    assert run["start_delay_ms"] == pytest.approx(delay_ms, abs=0.001)
    assert run["held_back_ms"] == 1500.0
    assert run["waited_ms"] == pytest.approx(waited_ms, abs=0.001)
    assert run["start_delay_ms"] == pytest.approx(run["held_back_ms"] + run["waited_ms"], abs=0.002)
    listed = (await api.call("GET", f"/api/jobs/{job['id']}/runs")).body["items"][0]
    assert {k: listed[k] for k in ("start_delay_ms", "held_back_ms", "waited_ms")} == {
        k: run[k] for k in ("start_delay_ms", "held_back_ms", "waited_ms")
    }

    # The console's jobs page (GET /api/jobs/overview) and ticks table (GET .../ticks) say the same.
    last = (await api.call("GET", "/api/jobs/overview")).body["items"][0]["last_run"]
    assert (last["start_delay_ms"], last["held_back_ms"], last["waited_ms"]) == (
        run["start_delay_ms"], run["held_back_ms"], run["waited_ms"],
    )  # fmt: skip
    window = f"from={_q(tick - timedelta(seconds=1))}&to={_q(tick)}"
    ticks = (await api.call("GET", f"/api/jobs/{job['id']}/ticks?{window}")).body["items"]
    (ran,) = [t for t in ticks if t["outcome"] == "ran"]
    assert ran["runs"][0]["start_delay_s"] * 1000 == pytest.approx(delay_ms, abs=0.001)
    assert ran["runs"][0]["held_back_s"] == 1.5
    assert ran["runs"][0]["waited_s"] * 1000 == pytest.approx(waited_ms, abs=0.001)

    # The CLI's runs table: START DELAY, HELD BACK and WAITED, in seconds.
    cli = msgspec.structs.replace(settings, api_url=api.base)
    args = _parser().parse_args(["runs", "list", str(job["id"])])
    capsys.readouterr()
    assert await asyncio.to_thread(run_command, args, cli) == 0
    header, line = capsys.readouterr().out.splitlines()[:2]
    assert re.split(r"\s{2,}", header)[5:8] == ["START DELAY", "HELD BACK", "WAITED"], header
    shown = [c for c in re.split(r"\s+", line) if re.fullmatch(r"-?\d+\.\d{3}s", c)]
    assert shown == [f"{delay_ms / 1000:.3f}s", "1.500s", f"{waited_ms / 1000:.3f}s"], line

    # The metrics observed the same figures for this one run.
    assert observed["start_delay"] == pytest.approx(delay_ms / 1000, abs=1e-6)
    assert observed["held_back"] == pytest.approx(1.5, abs=1e-6)
    assert observed["waited"] == pytest.approx(waited_ms / 1000, abs=1e-6)


def _histograms() -> dict[str, Any]:
    return {
        "start_delay": metrics.RUN_START_DELAY,
        "held_back": metrics.RUN_HELD_BACK,
        "waited": metrics.RUN_WAITED,
    }


def _q(instant: datetime) -> str:
    return quote(instant.isoformat())


async def test_the_wait_behind_a_predecessor_is_waited_not_held_back(
    api: Api, settings: Settings, harness: Harness
) -> None:
    # buffer_all: the second tick's run waits behind the first (which naps 1 s), is woken by its
    # end and pushed by the leader's outbox. Its start delay is all waited; nothing was held back.
    job = await insert_job(
        harness.pool, payload={"action": "test.delay.nap", "seconds": 1.0}, concurrency_policy="buffer_all"
    )
    now = datetime.now(UTC)
    first = await insert_run(harness.pool, job, now, due_at=now)
    second = await insert_run(harness.pool, job, now + timedelta(seconds=0.1), due_at=now + timedelta(seconds=0.1))
    await harness.stream.publish([first, second])
    waited_before = _sum(metrics.RUN_WAITED)
    async with harness.outbox(), Executor(settings) as executor:
        task = asyncio.create_task(executor.run())
        try:
            await wait_for(lambda: _ended(harness.pool, second.run_id), timeout=15, what="the second run completed")
        finally:
            executor.stop()
            await asyncio.wait_for(task, 10)
    waited_sum = _sum(metrics.RUN_WAITED) - waited_before

    run, ahead = [(await api.call("GET", f"/api/runs/{i}")).body for i in (second.run_id, first.run_id)]
    assert datetime.fromisoformat(run["started_at"]) >= datetime.fromisoformat(ahead["finished_at"])
    assert run["held_back_ms"] == 0.0
    assert run["waited_ms"] == run["start_delay_ms"] and run["waited_ms"] >= 800, run
    # The metric observed the two runs' waits, as the API shows them.
    assert waited_sum == pytest.approx((run["waited_ms"] + ahead["waited_ms"]) / 1000, abs=1e-5)
