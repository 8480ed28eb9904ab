"""The http and task kinds of work, run by a real executor (shell: test_shell_jobs.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp import web

from cronos.settings import Settings
from executor.service import Executor
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness


class Target:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.url = ""


@pytest.fixture
async def target() -> AsyncIterator[Target]:
    found = Target()

    async def handle(request: web.Request) -> web.StreamResponse:
        found.requests.append((request.path, dict(request.headers), await request.read()))
        if request.path == "/fail":
            return web.Response(status=503, text="down for maintenance")
        if request.path == "/redirect":
            raise web.HTTPFound("/ok")
        return web.Response(status=201, text="x" * 10_000 if request.path == "/big" else "created")

    runner, port = await serve(handle, "127.0.0.1")
    found.url = f"http://127.0.0.1:{port}"
    try:
        yield found
    finally:
        await runner.cleanup()


async def test_http_sends_identity_headers_and_records_status(
    harness: Harness, settings: Settings, target: Target
) -> None:
    job = await harness.job(
        kind="http", payload={"url": f"{target.url}/hook", "headers": {"X-Extra": "1"}, "body": {"a": 1}}
    )
    token = await harness.queue(job)
    async with Executor(settings) as ex:
        assert await ex.run_once() == {"completed": 1}
    (path, headers, body) = target.requests[0]
    assert path == "/hook" and msgspec.json.decode(body) == {"a": 1}
    assert headers["X-Cronos-Job-Id"] == str(job) and headers["X-Cronos-Run-Id"] == str(token.run_id)
    assert headers["X-Cronos-Scheduled-For"] == "2030-01-01T00:00:00+00:00"
    assert headers["X-Cronos-Attempt"] == "1" and headers["X-Extra"] == "1"
    assert headers["Idempotency-Key"] == f"{job}:2030-01-01T00:00:00+00:00"
    (run,) = await harness.runs(job)
    assert run.state == "completed" and run.result == "HTTP 201\ncreated"


async def test_http_unexpected_status_fails_with_excerpt(harness: Harness, settings: Settings, target: Target) -> None:
    job = await harness.job(kind="http", payload={"url": f"{target.url}/fail", "method": "GET"})
    await harness.queue(job)
    async with Executor(settings) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert run.state == "failed" and run.error == f"unexpected HTTP status 503 from GET {target.url}/fail"
    assert run.result == "HTTP 503\ndown for maintenance"


async def test_http_expect_status_and_redirects(harness: Harness, settings: Settings, target: Target) -> None:
    no_follow = await harness.job(kind="http", payload={"url": f"{target.url}/redirect", "expect_status": 302})
    follow = await harness.job(kind="http", payload={"url": f"{target.url}/redirect", "follow_redirects": True})
    await harness.queue(no_follow)
    await harness.queue(follow)
    async with Executor(settings) as ex:
        assert await ex.run_once() == {"completed": 2}
    assert [p for p, _, _ in target.requests].count("/ok") == 1  # only the one that follows


async def test_http_response_excerpt_is_bounded(harness: Harness, settings: Settings, target: Target) -> None:
    job = await harness.job(kind="http", payload={"url": f"{target.url}/big"})
    await harness.queue(job)
    async with Executor(msgspec.structs.replace(settings, result_max_bytes=100)) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert run.result is not None and len(run.result.encode()) < 150 and "more bytes" in run.result


async def test_sync_tasks_do_not_block_the_loop(harness: Harness, settings: Settings) -> None:
    import time

    import cronos

    @cronos.task("test.sync_sleep", replace=True)
    def sync_sleep(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
        time.sleep(0.3)
        return threading_name()

    def threading_name() -> str:
        import threading

        return threading.current_thread().name

    jobs = [await harness.job(payload={"action": "test.sync_sleep"}) for _ in range(4)]
    for job in jobs:
        await harness.queue(job)
    started = asyncio.get_running_loop().time()
    async with Executor(settings) as ex:
        assert await ex.run_once() == {"completed": 4}
    assert asyncio.get_running_loop().time() - started < 1.2  # in parallel threads, not one after another
    (run,) = await harness.runs(jobs[0])
    assert run.result is not None and "MainThread" not in run.result
