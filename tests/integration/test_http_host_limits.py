"""Per-host limits of http requests (issue 27, item 6), against real PostgreSQL, Redis, executor and
HTTP receivers that count the requests they hold at once: a herd against one slow host never has
more than its limit in flight there and all of it completes; another host's runs go meanwhile,
even with every execution slot's run waiting for the slow one; a job's own lower limit holds; a run
whose timeout comes while it waits fails naming the host; a cancel reaches a waiting run at once;
the API refuses a bad `host_limit` naming it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import pytest
from aiohttp import web

from cronos import metrics
from cronos.host_limits import parse_host_limits
from cronos.settings import Settings
from executor.service import Executor
from tests.integration.api_client import SEED_JOB, Api, running_api
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness
from tests.waiting import wait_for


class Receiver:
    """An HTTP target counting the requests it holds at once; each takes `delay_s`, and none is
    answered while `release` is clear."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.release = asyncio.Event()
        self.release.set()
        self.in_flight = 0
        self.most = 0
        self.served = 0
        self.url = ""
        self.key = ""  # the limiter's key of its origin

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)  # a slow target
            await self.release.wait()
        finally:
            self.in_flight -= 1
        self.served += 1
        return web.Response(text="ok")


@pytest.fixture
async def start() -> AsyncIterator[Callable[..., Awaitable[Receiver]]]:
    runners: list[web.AppRunner] = []

    async def started(host: str = "127.0.0.1", delay_s: float = 0.0) -> Receiver:
        receiver = Receiver(delay_s)
        runner, port = await serve(receiver.handle, host)
        runners.append(runner)
        receiver.url, receiver.key = f"http://{host}:{port}/hook", f"http://{host}:{port}"
        return receiver

    yield started
    for runner in runners:
        await runner.cleanup()


def limited(settings: Settings, entries: str, **changes: Any) -> Settings:
    return msgspec.structs.replace(settings, http_host_limits=parse_host_limits(entries), **changes)


async def _states(harness: Harness, jobs: list[int]) -> list[str]:
    return [run.state for job in jobs for run in await harness.runs(job)]


async def test_a_herd_against_a_slow_host_never_has_more_than_its_limit_there(
    harness: Harness, settings: Settings, start: Callable[..., Awaitable[Receiver]]
) -> None:
    slow = await start(delay_s=0.1)
    jobs = [await harness.job(kind="http", payload={"url": slow.url}) for _ in range(24)]
    for job in jobs:
        await harness.queue(job)
    granted = metrics.HTTP_HOST_WAITS.labels("granted")._value.get()
    async with Executor(limited(settings, "127.0.0.1=4")) as ex:
        assert await ex.run_once() == {"completed": 24}
    assert slow.most == 4 and slow.served == 24
    assert metrics.HTTP_HOST_WAITS.labels("granted")._value.get() - granted == 20  # all but the first 4 waited
    assert await _states(harness, jobs) == ["completed"] * 24


async def test_a_slow_host_holds_neither_another_host_nor_the_execution_slots(
    harness: Harness, settings: Settings, start: Callable[..., Awaitable[Receiver]]
) -> None:
    slow, fast = await start("127.0.0.1"), await start("127.0.0.2")
    slow.release.clear()  # it answers nothing until the end
    slow_jobs = [await harness.job(kind="http", payload={"url": slow.url}) for _ in range(12)]
    fast_jobs = [await harness.job(kind="http", payload={"url": fast.url}) for _ in range(6)]
    for job in slow_jobs + fast_jobs:  # the slow host's runs come first
        await harness.queue(job)
    # 4 execution slots for 12 runs of the slow host: only because a waiting run lends its slot
    # back can the fast host's runs start at all.
    async with Executor(limited(settings, "127.0.0.1=2", executor_concurrency=4)) as ex:
        working = asyncio.create_task(ex.run_once())

        async def fast_done() -> bool:
            return await _states(harness, fast_jobs) == ["completed"] * 6

        await wait_for(fast_done, timeout=15, what="the fast host's runs completed")
        assert ex.deps is not None
        assert (slow.in_flight, ex.deps.env.hosts.waiting(slow.key)) == (2, 10)  # the slow host's still queued
        assert ex.deps.gate.busy <= 4
        slow.release.set()
        assert await asyncio.wait_for(working, 15) == {"completed": 18}
    assert (slow.most, fast.served) == (2, 6)


async def test_a_jobs_own_host_limit_is_honoured(
    harness: Harness, settings: Settings, start: Callable[..., Awaitable[Receiver]]
) -> None:
    slow = await start(delay_s=0.1)
    jobs = [await harness.job(kind="http", payload={"url": slow.url, "host_limit": 3}) for _ in range(12)]
    for job in jobs:
        await harness.queue(job)
    async with Executor(settings) as ex:  # the host's own limit is the default, 32
        assert await ex.run_once() == {"completed": 12}
    assert slow.most == 3 and slow.served == 12


async def test_a_redirect_is_counted_at_the_host_it_leads_to(
    harness: Harness, settings: Settings, start: Callable[..., Awaitable[Receiver]]
) -> None:
    target = await start("127.0.0.1", delay_s=0.1)

    async def moved(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(target.url)

    runner, port = await serve(moved, "127.0.0.2")
    try:
        url = f"http://127.0.0.2:{port}/old"
        jobs = [await harness.job(kind="http", payload={"url": url, "follow_redirects": True}) for _ in range(8)]
        for job in jobs:
            await harness.queue(job)
        async with Executor(limited(settings, "127.0.0.1=2, 127.0.0.2=0")) as ex:
            assert await ex.run_once() == {"completed": 8}
    finally:
        await runner.cleanup()
    assert target.most == 2 and target.served == 8


async def test_a_run_whose_timeout_comes_while_it_waits_fails_naming_the_host(
    harness: Harness, settings: Settings, start: Callable[..., Awaitable[Receiver]]
) -> None:
    slow = await start()
    slow.release.clear()
    holder = await harness.job(kind="http", payload={"url": slow.url}, timeout_s=30)
    waiter = await harness.job(kind="http", payload={"url": slow.url}, timeout_s=1)
    await harness.queue(holder)
    await harness.queue(waiter)
    async with Executor(limited(settings, "127.0.0.1=1")) as ex:
        working = asyncio.create_task(ex.run_once())

        async def waiter_failed() -> bool:
            return await _states(harness, [waiter]) == ["failed"]

        await wait_for(waiter_failed, timeout=10, what="the waiting run to fail")
        slow.release.set()
        assert await asyncio.wait_for(working, 10) == {"completed": 1, "failed": 1}
    (run,) = await harness.runs(waiter)
    assert run.error is not None and re.match(r"waited (0\.9|1\.0)s for a connection slot to host ", run.error)
    assert f"s for a connection slot to host {slow.key}: 1 requests in flight there (limit 1)" in run.error
    assert slow.served == 1


async def test_a_cancel_reaches_a_run_waiting_for_its_host_at_once(
    harness: Harness, settings: Settings, start: Callable[..., Awaitable[Receiver]]
) -> None:
    slow = await start()
    slow.release.clear()
    holder = await harness.job(kind="http", payload={"url": slow.url}, timeout_s=30)
    waiter = await harness.job(kind="http", payload={"url": slow.url}, timeout_s=30, max_retries=2)
    await harness.queue(holder)
    token = await harness.queue(waiter)
    # A long grace: a cancel that ended the wait only by force would take 30 s.
    fast = limited(settings, "127.0.0.1=1", run_lease_s=0.6, cancel_grace_s=30.0)
    async with running_api(settings) as api, Executor(fast) as ex:
        working = asyncio.create_task(ex.run_once())
        await wait_for(
            lambda: _waiting(ex, slow.key), timeout=10, what="a run waiting for the slow host"
        )  # fmt: skip
        assert (await api.call("POST", f"/api/runs/{token.run_id}/cancel")).status == 202

        async def cancelled() -> bool:
            return await _states(harness, [waiter]) == ["cancelled"]

        await wait_for(cancelled, timeout=5, what="the waiting run cancelled")
        slow.release.set()
        assert await asyncio.wait_for(working, 10) == {"completed": 1, "cancelled": 1}
    (run,) = await harness.runs(waiter)  # never retried
    assert (run.state, run.error) == ("cancelled", "cancelled by local")
    assert slow.served == 1


async def _waiting(ex: Executor, key: str) -> bool:
    return ex.deps is not None and ex.deps.env.hosts.waiting(key) == 1


@pytest.mark.parametrize("bad", [0, -1, 10_001, "5", 2.5])
async def test_the_api_refuses_a_bad_host_limit_naming_it(settings: Settings, bad: object, api: Api) -> None:
    job = {**SEED_JOB, "kind": "http", "payload": {"url": "https://example.com/hook", "host_limit": bad}}
    reply = await api.call("POST", "/api/jobs", json=job)
    assert reply.status == 422, reply.body
    assert reply.headers["Content-Type"].startswith("application/problem+json")
    assert reply.body["field"] == "$.payload.host_limit" and "$.payload.host_limit" in reply.body["detail"]


async def test_the_api_keeps_a_jobs_host_limit(api: Api) -> None:
    job = {**SEED_JOB, "kind": "http", "payload": {"url": "https://example.com/hook", "host_limit": 5}}
    created = await api.call("POST", "/api/jobs", json=job)
    assert created.status == 201, created.body
    assert created.body["payload"]["host_limit"] == 5


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client
