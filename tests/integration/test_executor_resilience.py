"""Backends going away under a running executor: reading pauses, nothing is lost or doubled.

A small TCP proxy sits between the executor and Redis/PostgreSQL so a test can cut and
restore the connection without touching the shared servers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import msgspec
import pytest
import redis.asyncio as aioredis

from cronos.backoff import Backoff
from cronos.keys import Keys
from cronos.settings import Settings
from cronos.stream import RunStream
from executor.service import Executor
from tests.integration.ledger_helpers import Harness, insert_run
from tests.waiting import wait_for


class Proxy:
    """Forwards TCP to `target`; `cut()` drops every connection and refuses new ones."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.open = True
        self.refused = 0  # connections attempted while cut
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            self.refused += 1
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers |= {writer, up_writer}
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()

    def cut(self) -> None:
        self.open = False
        for writer in self._writers:
            writer.close()
        self._writers.clear()

    def restore(self) -> None:
        self.open = True

    async def close(self) -> None:
        self.cut()
        for task in list(self._pipes):
            task.cancel()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@contextlib.asynccontextmanager
async def proxied(url: str) -> AsyncIterator[tuple[Proxy, str]]:
    parts = urlsplit(url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 0)
    port = await proxy.start()
    netloc = parts.netloc.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{port}")
    try:
        yield proxy, urlunsplit(parts._replace(netloc=netloc))
    finally:
        await proxy.close()


@pytest.fixture
async def harness(pg_pool: asyncpg.Pool, redis_client: aioredis.Redis, settings: Settings) -> Harness:
    stream = RunStream(redis_client, Keys(settings.key_prefix))
    await stream.ensure_group()
    return Harness(pg_pool, stream)


async def _states(harness: Harness, job: int) -> list[str]:
    return [r.state for r in await harness.runs(job)]


async def test_redis_outage_pauses_reading_and_work_resumes(
    harness: Harness, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    job = await harness.job(payload={"action": "noop"}, concurrency_policy="allow")
    async with proxied(settings.redis_url) as (proxy, url):
        own = msgspec.structs.replace(settings, redis_url=url)
        async with Executor(own) as ex:
            task = asyncio.create_task(ex.run())
            try:
                await harness.queue(job, 0)
                await wait_for(lambda: _equal(_states(harness, job), ["completed"]), what="first run")
                proxy.cut()
                await harness.queue(job, 1)  # pushed while the executor cannot reach Redis
                # Its blocking read fails once the link is gone (within the read's block time).
                await wait_for(lambda: _logged(caplog, "stream.read_failed"), timeout=10, what="the read failing")
                assert task.done() is False  # the role survives the outage
                proxy.restore()
                await wait_for(
                    lambda: _equal(_states(harness, job), ["completed", "completed"]), timeout=15, what="second run"
                )
            finally:
                ex.stop()
                await asyncio.wait_for(task, 10)
    assert (await harness.stream.info()).pending == 0


async def test_postgresql_outage_keeps_the_result_and_writes_it_once(
    harness: Harness, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    # Long enough that the cut lands while the run is running on a loaded machine (at 0.5 s the poll
    # that sees `running` could come after the run had already ended and written its result).
    job = await harness.job(payload={"action": "sleep", "seconds": 3})
    token = await harness.queue(job)
    async with proxied(settings.database_url) as (proxy, url):
        own = msgspec.structs.replace(settings, database_url=url, run_lease_s=30)
        async with Executor(own) as ex:
            task = asyncio.create_task(ex.run())
            try:
                await wait_for(lambda: _equal(harness.state(token.run_id), "running"), what="run started")
                proxy.cut()  # the run ends while PostgreSQL is unreachable

                async def deferred() -> bool:
                    return any(getattr(r, "event", None) == "run.record_deferred" for r in caplog.records)

                await wait_for(deferred, timeout=15, what="the result's write deferred")
                assert await harness.state(token.run_id) == "running"
                proxy.restore()
                await wait_for(
                    lambda: _equal(harness.state(token.run_id), "completed"), timeout=15, what="result written"
                )
            finally:
                ex.stop()
                await asyncio.wait_for(task, 10)
    (run,) = await harness.runs(job)
    assert run.state == "completed" and run.result == '{"slept_s":3.0}'


async def test_an_executor_outlives_a_postgresql_outage_of_more_than_1024_probes(
    harness: Harness, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 22: the health loop's backoff computed `base * 2**attempts`, an OverflowError at the
    1,025th probe that ended the executor. With a fast probe backoff, 1,100 failed probes in
    seconds: the role is still there, and runs work once PostgreSQL answers."""
    job = await harness.job(payload={"action": "noop"}, concurrency_policy="allow")
    async with proxied(settings.database_url) as (proxy, url):
        own = msgspec.structs.replace(settings, database_url=url)
        async with Executor(own, probe_backoff=lambda: Backoff(base_s=1e-4, cap_s=1e-4)) as ex:
            task = asyncio.create_task(ex.run())
            try:
                proxy.cut()
                await wait_for(lambda: _logged(caplog, "backend.waiting"), timeout=10, what="probing PostgreSQL")

                async def probed_or_ended() -> bool:
                    return proxy.refused >= 1100 or task.done()

                await wait_for(probed_or_ended, timeout=40, what="1,100 failed probes")
                assert not task.done(), f"the role ended: {task.exception()!r}"
                proxy.restore()
                await harness.queue(job, 0)
                await wait_for(lambda: _equal(_states(harness, job), ["completed"]), timeout=10, what="a run")
                assert not task.done()
            finally:
                ex.stop()
                await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 10)


async def _equal(probe: Any, expected: Any) -> bool:
    return bool(await probe == expected)


async def test_redis_losing_the_stream_and_group_does_not_stop_the_executor(
    harness: Harness, settings: Settings, redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    job = await harness.job(payload={"action": "noop"}, concurrency_policy="allow")
    async with Executor(settings) as ex:
        task = asyncio.create_task(ex.run())
        try:
            await harness.queue(job, 0)
            await wait_for(lambda: _equal(_states(harness, job), ["completed"]), what="first run")
            await redis_client.delete(harness.stream.key)  # Redis restarted without persistence
            await wait_for(lambda: _logged(caplog, "stream.group_lost"), timeout=10, what="the group seen lost")
            assert not task.done()
            await harness.stream.ensure_group()  # what the leader does when it sees the loss
            await harness.queue(job, 1)  # ... and it re-pushes queued runs
            await wait_for(
                lambda: _equal(_states(harness, job), ["completed", "completed"]), timeout=10, what="second run"
            )
        finally:
            ex.stop()
            await asyncio.wait_for(task, 10)


@pytest.mark.parametrize("backend", ["postgresql", "redis"])
async def test_executor_starts_waiting_for_a_backend_that_is_not_up_yet(
    harness: Harness, settings: Settings, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    job = await harness.job(payload={"action": "noop"})
    await harness.queue(job)
    url = settings.database_url if backend == "postgresql" else settings.redis_url
    async with proxied(url) as (proxy, proxy_url):
        field = "database_url" if backend == "postgresql" else "redis_url"
        proxy.cut()
        executor = Executor(msgspec.structs.replace(settings, **{field: proxy_url}))
        entering = asyncio.create_task(executor.__aenter__())

        async def waiting() -> bool:
            return any(getattr(r, "event", None) == "backend.waiting" and getattr(r, "backend", None) == backend
                       for r in caplog.records)  # fmt: skip

        await wait_for(waiting, timeout=10, what=f"the executor waiting for {backend}")
        assert not entering.done()  # still waiting, not crashed
        proxy.restore()
        ex = await asyncio.wait_for(entering, 10)
        try:
            assert await ex.run_once() == {"completed": 1}
        finally:
            await ex.__aexit__(None, None, None)


@pytest.mark.parametrize("backend", ["redis", "postgresql"])
async def test_a_token_deferred_by_a_blip_runs_as_soon_as_the_backend_answers(
    harness: Harness, settings: Settings, redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture, backend: str
) -> None:
    """Issue 13: the executor holding a token that failed on a backend error tries it again the
    moment the backend answers, not when XAUTOCLAIM finds it idle (2 x lease: 60 s here).

    The token is pushed 2 s ahead with a 1 s lead: read at once, locked at -1 s, claimed at 0.
    Redis is cut before the lock, PostgreSQL after it (before the claim)."""
    job = await harness.job(payload={"action": "noop"})
    due = datetime.now(UTC) + timedelta(seconds=2)
    token = await insert_run(harness.pool, job, due, due_at=due)
    token = msgspec.structs.replace(token, due_ms=int(due.timestamp() * 1000))
    lock_key = Keys(settings.key_prefix).tick_lock(token.job_id, token.scheduled_for_ms, token.attempt)
    url = settings.redis_url if backend == "redis" else settings.database_url
    field = "redis_url" if backend == "redis" else "database_url"
    async with proxied(url) as (proxy, proxy_url):
        own = msgspec.structs.replace(settings, **{field: proxy_url}, run_lease_s=30, push_lead_ms=1000)
        async with Executor(own) as ex:
            task = asyncio.create_task(ex.run())
            try:
                assert ex.deps is not None
                await harness.stream.publish([token])
                if backend == "redis":
                    await wait_for(lambda: _equal(_held(ex), 1), what="the token held for its lock time")
                else:
                    await wait_for(lambda: redis_client.exists(lock_key), what="the tick lock taken")
                proxy.cut()
                await wait_for(lambda: _logged(caplog, "token.deferred"), timeout=10, what="the token deferred")
                await asyncio.sleep(2.0)  # a 2 s outage: past the client's own retries
                proxy.restore()
                back = datetime.now(UTC)
                await wait_for(lambda: _equal(harness.state(token.run_id), "completed"), timeout=10, what="the run")
            finally:
                ex.stop()
                await asyncio.wait_for(task, 10)
    (run,) = await harness.runs(job)
    assert run.started_at is not None and run.started_at >= due
    assert (run.started_at - back).total_seconds() < 2.0, f"started {run.started_at - back} after the backend answered"
    assert _logged_now(caplog, "token.retried")
    assert (await harness.stream.info()).pending == 0  # settled by the executor that held it


async def _held(ex: Executor) -> int:
    return ex.deps.gate.held if ex.deps is not None else 0


async def _logged(caplog: pytest.LogCaptureFixture, event: str) -> bool:
    return _logged_now(caplog, event)


def _logged_now(caplog: pytest.LogCaptureFixture, event: str) -> bool:
    return any(getattr(r, "event", None) == event for r in caplog.records)
