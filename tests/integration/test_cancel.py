"""Cancelling a run (issue 24, item 4) against a real API, PostgreSQL, Redis and executor: a queued
or waiting run at once; a running one through its executor's heartbeat, cooperatively (a task's
`ctx.cancelled`, a shell command's SIGTERM) or by force after the grace (its process group killed,
its HTTP request aborted, its task cancelled); an ended run is a 409; who did it is in the ledger
and the audit trail. And a plain function past its timeout keeps its run running (item 6)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import pytest
from aiohttp import web

import cronos
from cronos import metrics
from cronos.cli import main as cli_main
from cronos.settings import Settings
from cronos.store.claims import ClaimedRun
from cronos.store.runs import RunStore
from cronos.store.tokens import TokenStore
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import BASE, Harness, set_epoch
from tests.integration.test_shell_jobs import _wait_gone
from tests.waiting import wait_for

GRACE_S = 1.0
SIGNALLED: dict[int, float] = {}  # run id -> when its task saw ctx.cancelled (monotonic)
DEADLINES: dict[int, Any] = {}
FORCED: set[int] = set()  # runs whose async task was cancelled (ignored the signal)
ATTEMPTS: list[tuple[int, float, float]] = []  # (attempt, thread start, thread end) of the sleepy plain function


@cronos.task("test.cancel.cooperative", replace=True)
async def cooperative(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
    DEADLINES[ctx.run_id] = ctx.deadline
    await ctx.cancelled.wait()
    SIGNALLED[ctx.run_id] = time.monotonic()
    return "stopped early"


@cronos.task("test.cancel.cooperative_sync", replace=True)
def cooperative_sync(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
    while not ctx.is_cancelled():  # from the worker thread
        time.sleep(0.01)
    SIGNALLED[ctx.run_id] = time.monotonic()
    return "stopped early"


@cronos.task("test.cancel.first_waits", replace=True)
async def first_waits(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
    """The job's first tick runs until cancelled; its later ticks end at once."""
    if ctx.scheduled_for == BASE:
        await ctx.cancelled.wait()
    return "done"


@cronos.task("test.cancel.stubborn", replace=True)
async def stubborn(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        FORCED.add(ctx.run_id)
        raise


RELEASE = threading.Event()  # lets the first attempt's thread return


@cronos.task("test.cancel.sleepy", replace=True)
def sleepy(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    started = time.monotonic()
    if ctx.attempt == 1:
        RELEASE.wait(10)  # ignores its timeout: a thread cannot be interrupted
    else:
        time.sleep(0.3)  # past its timeout too
    ATTEMPTS.append((ctx.attempt, started, time.monotonic()))


@pytest.fixture
def fast(settings: Settings) -> Settings:
    """A heartbeat every 0.2 s: a cancel reaches the executor within that."""
    return msgspec.structs.replace(settings, run_lease_s=0.6, cancel_grace_s=GRACE_S, allow_shell=True)


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _running(harness: Harness, run_id: int) -> None:
    await wait_for(lambda: _is(harness, run_id, "running"), timeout=10, what=f"run {run_id} running")


async def _is(harness: Harness, run_id: int, state: str) -> bool:
    return await harness.state(run_id) == state


async def _run(pool: asyncpg.Pool, run_id: int) -> asyncpg.Record:
    return await pool.fetchrow("SELECT * FROM runs WHERE id = $1", run_id)


# --- runs that have not started ---------------------------------------------------------------


async def test_a_queued_run_is_cancelled_at_once_audited_and_its_token_runs_nothing(
    harness: Harness, api: Api, fast: Settings
) -> None:
    job = await harness.job(payload={"action": "noop"}, max_retries=3)
    token = await harness.queue(job)
    reply = await api.call("POST", f"/api/runs/{token.run_id}/cancel")
    assert reply.status == 200, reply.body
    assert (reply.body["state"], reply.body["error"]) == ("cancelled", "cancelled by local")
    assert reply.body["finished_at"] is not None and reply.body["started_at"] is None
    async with Executor(fast) as ex:
        assert await ex.run_once() == {"not_queued": 1}  # its token finds it cancelled
    (run,) = await harness.runs(job)  # and no retry
    assert run.state == "cancelled"
    history = await api.call("GET", f"/api/jobs/{job}/history")
    (entry,) = [e for e in history.body["items"] if e["action"] == "run_cancelled"]
    assert entry["actor"] == "local" and entry["detail"] == {"run_id": token.run_id, "state": "queued", "ended": True}

    again = await api.call("POST", f"/api/runs/{token.run_id}/cancel")
    assert again.status == 409 and again.headers["Content-Type"].startswith("application/problem+json")
    assert again.body["status"] == 409 and "has ended (cancelled)" in again.body["detail"]
    missing = await api.call("POST", "/api/runs/987654321/cancel")
    assert missing.status == 404 and missing.body["type"] == "urn:cronos:problem:not-found"


async def test_cancelling_a_waiting_run_wakes_the_one_behind_it_when_nothing_runs(harness: Harness, api: Api) -> None:
    job = await harness.job()
    first, second = await harness.queue(job, 0), await harness.queue(job, 1)
    await harness.pool.execute("UPDATE runs SET state = 'waiting' WHERE job_id = $1", job)
    reply = await api.call("POST", f"/api/runs/{first.run_id}/cancel")
    assert reply.status == 200 and reply.body["state"] == "cancelled"
    assert await harness.state(second.run_id) == "queued"  # woken: nothing of its job runs
    completed = await harness.queue(job, 2)
    await harness.pool.execute(
        "UPDATE runs SET state = 'completed', finished_at = now() WHERE id = $1", completed.run_id
    )
    reply = await api.call("POST", f"/api/runs/{completed.run_id}/cancel")
    assert reply.status == 409 and "has ended (completed)" in reply.body["detail"]


async def test_cancel_needs_the_write_scope(harness: Harness, pg_pool: asyncpg.Pool, api: Api) -> None:
    job = await harness.job()
    token = await harness.queue(job)
    _info, reader = await TokenStore(pg_pool).create("reader", ["read"], None, actor="cli")
    _info, writer = await TokenStore(pg_pool).create("ops", ["write"], None, actor="cli")
    assert (await api.call("POST", f"/api/runs/{token.run_id}/cancel")).status == 401  # protected mode is over
    refused = await api.call("POST", f"/api/runs/{token.run_id}/cancel", token=reader)
    assert refused.status == 403 and await harness.state(token.run_id) == "queued"
    done = await api.call("POST", f"/api/runs/{token.run_id}/cancel", token=writer)
    assert done.status == 200 and done.body["error"] == "cancelled by ops"


@pytest.fixture
def own_logging() -> Iterator[None]:
    """The CLI sets the root logger up for itself (on the stderr capsys captures): put it back."""
    root, access = logging.getLogger(), logging.getLogger("aiohttp.access")
    saved = (root.handlers[:], root.level, access.level)
    yield
    root.handlers[:], _level, _access = saved
    root.setLevel(_level)
    access.setLevel(_access)


async def test_the_cli_cancels_in_one_line(
    harness: Harness, api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], own_logging: None
) -> None:
    job = await harness.job()
    token = await harness.queue(job)
    monkeypatch.setenv("CRONOS_API_URL", api.base)
    cancel = ["runs", "cancel", str(token.run_id)]
    assert await asyncio.to_thread(cli_main, cancel) == 0
    assert capsys.readouterr().out == f"Run {token.run_id} of job {job} is cancelled.\n"
    assert await asyncio.to_thread(cli_main, cancel) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "has ended (cancelled)" in err


# --- running runs: through the executor -----------------------------------------------------


async def test_a_running_task_is_signalled_and_ends_cancelled_without_a_retry(
    harness: Harness, api: Api, fast: Settings
) -> None:
    async_job = await harness.job(payload={"action": "test.cancel.cooperative"}, max_retries=2, timeout_s=20)
    sync_job = await harness.job(payload={"action": "test.cancel.cooperative_sync"}, max_retries=2, timeout_s=20)
    runs = [await harness.queue(async_job), await harness.queue(sync_job)]
    async with Executor(fast) as ex:
        working = asyncio.create_task(ex.run_once())
        for token in runs:
            await _running(harness, token.run_id)
        asked = time.monotonic()
        for token in runs:
            reply = await api.call("POST", f"/api/runs/{token.run_id}/cancel")
            assert reply.status == 202 and reply.body["state"] == "running", reply.body
        assert await asyncio.wait_for(working, 10) == {"cancelled": 2}
    delays = [SIGNALLED[t.run_id] - asked for t in runs]
    print(f"cancel request to task stop: {[round(d, 3) for d in delays]} s")
    assert max(delays) < GRACE_S  # signalled at once (or at the next beat), well before the grace forces anything
    for token in runs:
        row = await _run(harness.pool, token.run_id)
        assert (row["state"], row["error"], row["result"]) == ("cancelled", "cancelled by local", "stopped early")
    assert DEADLINES[runs[0].run_id] == (await _run(harness.pool, runs[0].run_id))["started_at"] + timedelta(seconds=20)
    assert [len(await harness.runs(job)) for job in (async_job, sync_job)] == [1, 1]  # never retried
    history = await api.call("GET", f"/api/jobs/{async_job}/history")
    assert [e["detail"]["state"] for e in history.body["items"] if e["action"] == "run_cancelled"] == ["running"]


async def _listening(pool: asyncpg.Pool) -> bool:
    sessions = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    return bool(await pool.fetchval(f"{sessions} AND query LIKE 'LISTEN%cronos_cancels%'"))


async def test_the_notification_stops_the_task_long_before_the_next_heartbeat(
    harness: Harness, api: Api, fast: Settings
) -> None:
    slow_beats = msgspec.structs.replace(fast, run_lease_s=30.0)  # a heartbeat every 10 s
    job = await harness.job(payload={"action": "test.cancel.cooperative"}, timeout_s=60)
    token = await harness.queue(job)
    async with Executor(slow_beats) as ex:
        working = asyncio.create_task(ex.run_once())
        await _running(harness, token.run_id)
        await wait_for(lambda: _listening(harness.pool), what="the executor's LISTEN on cronos_cancels")
        asked = time.monotonic()
        assert (await api.call("POST", f"/api/runs/{token.run_id}/cancel")).status == 202
        assert await asyncio.wait_for(working, 5) == {"cancelled": 1}
    delay = SIGNALLED[token.run_id] - asked
    print(f"cancel request to task stop through the notification: {delay * 1000:.1f} ms (heartbeat every 10 s)")
    assert delay < 1.0


async def test_a_request_without_its_notification_is_found_by_the_heartbeat(harness: Harness, fast: Settings) -> None:
    job = await harness.job(payload={"action": "test.cancel.cooperative"}, timeout_s=60)
    token = await harness.queue(job)
    async with Executor(fast) as ex:
        working = asyncio.create_task(ex.run_once())
        await _running(harness, token.run_id)
        await harness.pool.execute(  # the request alone, as if its NOTIFY reached no one
            "INSERT INTO run_cancels (run_id, job_id, scheduled_for, requested_by)"
            " SELECT id, job_id, scheduled_for, 'someone' FROM runs WHERE id = $1",
            token.run_id,
        )
        assert await asyncio.wait_for(working, 5) == {"cancelled": 1}
    (run,) = await harness.runs(job)
    assert (run.state, run.error) == ("cancelled", "cancelled by someone")


async def test_the_run_waiting_behind_a_cancelled_one_proceeds(harness: Harness, api: Api, fast: Settings) -> None:
    job = await harness.job(payload={"action": "test.cancel.first_waits"}, concurrency_policy="buffer_all")
    first = await harness.queue(job, 0)
    async with harness.outbox(), Executor(fast) as ex:
        serving = asyncio.create_task(ex.run())
        await _running(harness, first.run_id)
        second = await harness.queue(job, 1)
        await wait_for(lambda: _is(harness, second.run_id, "waiting"), what="the second run waiting (buffer_all)")
        assert (await api.call("POST", f"/api/runs/{first.run_id}/cancel")).status == 202
        await wait_for(lambda: _is(harness, second.run_id, "completed"), what="the second run woken, then run")
        ex.stop()
        await asyncio.wait_for(serving, 10)
    assert await harness.state(first.run_id) == "cancelled"


async def test_a_task_that_ignores_the_signal_is_cancelled_after_the_grace(
    harness: Harness, api: Api, fast: Settings
) -> None:
    job = await harness.job(payload={"action": "test.cancel.stubborn"}, timeout_s=30, max_retries=1)
    token = await harness.queue(job)
    async with Executor(fast) as ex:
        working = asyncio.create_task(ex.run_once())
        await _running(harness, token.run_id)
        asked = time.monotonic()
        assert (await api.call("POST", f"/api/runs/{token.run_id}/cancel")).status == 202
        repeated = await api.call("POST", f"/api/runs/{token.run_id}/cancel")  # within the grace: still running
        assert repeated.status == 202 and repeated.body["state"] == "running"
        assert await asyncio.wait_for(working, 10) == {"cancelled": 1}
    took = time.monotonic() - asked
    assert GRACE_S <= took < GRACE_S + 2, took
    assert token.run_id in FORCED
    (run,) = await harness.runs(job)
    assert (run.state, run.error) == ("cancelled", "cancelled by local")
    history = await api.call("GET", f"/api/jobs/{job}/history")  # asked twice: audited once
    assert [e["detail"]["state"] for e in history.body["items"] if e["action"] == "run_cancelled"] == ["running"]


async def test_a_shell_run_gets_sigterm_then_its_process_group_is_killed_after_the_grace(
    harness: Harness, api: Api, fast: Settings, tmp_path: Path
) -> None:
    grace_s = 2.0  # room for the polite run to end by SIGTERM first, however busy the machine
    polite, deaf = tmp_path / "polite.pid", tmp_path / "deaf.pid"
    # `sleep` in the background and `wait`: SIGTERM to the group ends both at once.
    polite_job = await harness.job(kind="shell", payload={"argv": ["sh", "-c", f"sleep 60 & echo $! > {polite}; wait"]})
    # Ignores SIGTERM (its `sleep` inherits that): only the kill after the grace ends it.
    deaf_script = f"trap '' TERM; sleep 60 & echo $! > {deaf}; wait; wait"
    deaf_job = await harness.job(kind="shell", payload={"argv": ["sh", "-c", deaf_script]})
    runs = [await harness.queue(polite_job), await harness.queue(deaf_job)]
    async with Executor(msgspec.structs.replace(fast, cancel_grace_s=grace_s)) as ex:
        working = asyncio.create_task(ex.run_once())
        for token in runs:
            await _running(harness, token.run_id)
        await wait_for(lambda: _written(polite, deaf), what="the shells' pid files")
        asked = time.monotonic()
        for token in runs:
            assert (await api.call("POST", f"/api/runs/{token.run_id}/cancel")).status == 202
        await wait_for(lambda: _is(harness, runs[0].run_id, "cancelled"), timeout=grace_s, interval=0.01,
                       what="the SIGTERMed shell run to end before the grace")  # fmt: skip
        await _wait_gone(int(polite.read_text()), "the polite `sleep`")
        assert await harness.state(runs[1].run_id) == "running"  # still, within its grace
        assert await asyncio.wait_for(working, 10) == {"cancelled": 2}
    assert time.monotonic() - asked >= grace_s
    await _wait_gone(int(deaf.read_text()), "the `sleep` that ignored SIGTERM")
    polite_run, deaf_run = [await _run(harness.pool, token.run_id) for token in runs]
    for row in (polite_run, deaf_run):
        assert (row["state"], row["error"]) == ("cancelled", "cancelled by local")
    assert polite_run["result"].startswith("exit -15\n")  # SIGTERM ended it: its output is kept
    assert deaf_run["result"] is None  # killed with the executor's cancel of its work


async def _written(*paths: Path) -> bool:
    return all(p.exists() and p.read_text().strip() for p in paths)


async def test_a_running_http_request_is_aborted_after_the_grace(harness: Harness, api: Api, fast: Settings) -> None:
    arrived, aborted = asyncio.Event(), asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        arrived.set()
        for _ in range(3000):  # 30 s at most: until the client goes away
            if request.transport is None or request.transport.is_closing():
                aborted.set()
                break
            await asyncio.sleep(0.01)
        return web.Response(text="too late")

    runner, port = await serve(slow, "127.0.0.1")
    try:
        job = await harness.job(kind="http", payload={"url": f"http://127.0.0.1:{port}/slow"}, timeout_s=60)
        token = await harness.queue(job)
        async with Executor(fast) as ex:
            working = asyncio.create_task(ex.run_once())
            await asyncio.wait_for(arrived.wait(), 10)
            assert (await api.call("POST", f"/api/runs/{token.run_id}/cancel")).status == 202
            await asyncio.wait_for(aborted.wait(), GRACE_S + 3)
            assert await asyncio.wait_for(working, 10) == {"cancelled": 1}
    finally:
        await runner.cleanup()
    (run,) = await harness.runs(job)
    assert (run.state, run.error) == ("cancelled", "cancelled by local")


# --- item 6: a plain function past its timeout -----------------------------------------------


async def test_a_thread_past_its_timeout_keeps_its_run_running_so_attempts_never_overlap(
    harness: Harness, fast: Settings
) -> None:
    ATTEMPTS.clear()
    RELEASE.clear()
    job = await harness.job(payload={"action": "test.cancel.sleepy"}, timeout_s=0.2, max_retries=1)
    first = await harness.queue(job)
    async with harness.outbox(), Executor(fast) as ex:
        serving = asyncio.create_task(ex.run())
        await _running(harness, first.run_id)
        await wait_for(_overrunning, what="the first attempt past its timeout, its thread still running")
        await asyncio.sleep(0.3)  # time for a retry to start, were the slot given up
        assert await harness.state(first.run_id) == "running"  # kept: the forbid slot is still taken
        assert len(await harness.runs(job)) == 1
        held = time.monotonic()
        RELEASE.set()
        await wait_for(lambda: _attempts(harness, job), timeout=10, what="both attempts to end")
        ex.stop()
        await asyncio.wait_for(serving, 10)
    (one, _one_start, one_end), (two, two_start, _two_end) = sorted(ATTEMPTS)
    assert (one, two) == (1, 2)
    assert two_start >= one_end, "the retry started while the first attempt's thread ran"
    assert one_end >= held
    for run in await harness.runs(job):
        assert (run.state, run.error) == ("failed", "timed out after 0.2 s")
        assert run.duration_ms is not None and run.duration_ms >= 300  # recorded when its thread returned
    assert metrics.RUNS_OVERRUNNING._value.get() == 0


async def _overrunning() -> bool:
    return bool(metrics.RUNS_OVERRUNNING._value.get() == 1)


async def _attempts(harness: Harness, job: int) -> bool:
    runs = await harness.runs(job)
    return len(runs) == 2 and all(r.state == "failed" for r in runs) and len(ATTEMPTS) == 2


async def test_a_cancelled_run_whose_executor_died_is_reaped_cancelled_not_retried(harness: Harness, api: Api) -> None:
    job = await harness.job(max_retries=2)
    token = await harness.queue(job)
    store = RunStore(harness.pool)
    (claimed,) = await store.claim([token.run_id], "a-dead-executor", 60)
    assert isinstance(claimed, ClaimedRun)
    assert (await api.call("POST", f"/api/runs/{token.run_id}/cancel")).status == 202
    await harness.pool.execute("UPDATE runs SET lease_until = now() - interval '1 s' WHERE id = $1", token.run_id)
    await set_epoch(harness.pool, 7)
    reaped = await store.reap(7)
    assert (reaped.lost, reaped.retried) == (1, 0)
    (run,) = await harness.runs(job)  # no retry: the cancel holds though nobody was left to honour it
    assert (run.state, run.error) == ("cancelled", "cancelled by local (executor lost)")
