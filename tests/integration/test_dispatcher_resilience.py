"""Redis or PostgreSQL going away: the leader steps down, logs one line, reconnects and leads again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import msgspec
import pytest

from cronos import redis_client
from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable
from cronos.settings import Settings
from dispatcher.service import Dispatcher
from tests.waiting import wait_for


class Proxy:
    """A TCP forwarder the test can cut (every connection dropped, new ones refused and counted)
    and restore."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self.refused = 0  # connections attempted while cut
        self._cut = False
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        self._cut = True
        for writer in list(self._writers):
            writer.transport.abort()

    def restore(self) -> None:
        self._cut = False

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


def _via(url: str, port: int) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)
    netloc = (host[0] + "@" if len(host) == 2 else "") + f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


@contextlib.asynccontextmanager
async def proxied(url: str, default_port: int) -> AsyncIterator[tuple[Proxy, str]]:
    """A proxy in front of the service at `url`, and the url through it."""
    target = urlsplit(url)
    proxy = Proxy(target.hostname or "127.0.0.1", target.port or default_port)
    await proxy.start()
    try:
        yield proxy, _via(url, proxy.port)
    finally:
        await proxy.close()


@contextlib.asynccontextmanager
async def role(settings: Settings) -> AsyncIterator[Dispatcher]:
    async with Dispatcher(settings) as d:
        task = asyncio.create_task(d.run())
        try:
            yield d
        finally:
            d.stop()
            await asyncio.wait_for(task, timeout=10)


async def _leading(d: Dispatcher) -> bool:
    return d.election is not None and d.election.leading


async def _not_leading(d: Dispatcher) -> bool:
    return not await _leading(d)


@pytest.mark.parametrize("backend", ["redis", "postgresql"])
async def test_a_backend_going_away_ends_leadership_then_it_leads_again(
    backend: str, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    url = settings.redis_url if backend == "redis" else settings.database_url
    field = "redis_url" if backend == "redis" else "database_url"
    caplog.set_level(logging.INFO)
    port = 6379 if backend == "redis" else 5432
    async with proxied(url, port) as (proxy, via), role(msgspec.structs.replace(settings, **{field: via})) as d:
        await wait_for(lambda: _leading(d), timeout=5, what="leading")
        first_epoch = d.election.epoch  # type: ignore[union-attr]
        proxy.cut()
        await wait_for(lambda: _not_leading(d), timeout=3, what="stepping down")
        unavailable = f"dispatcher.{backend}_unavailable"
        await wait_for(lambda: _logged(caplog, unavailable), timeout=5, what="the state change logged")
        await wait_for(lambda: _refused(proxy, 3), timeout=5, what="a few reconnect attempts failing")
        assert _events(caplog).count(unavailable) == 1, "one line per state change, not one per retry"
        assert not _tracebacks(caplog), "no traceback flood"
        proxy.restore()
        await wait_for(lambda: _leading(d), timeout=10, what="leading again")
        assert d.election.epoch > first_epoch  # type: ignore[operator, union-attr]


async def test_the_redis_client_reports_a_lost_redis_as_backend_unavailable(settings: Settings) -> None:
    """The one translation the dispatcher relies on to step down instead of crashing."""
    async with proxied(settings.redis_url, 6379) as (proxy, via):
        client = redis_client.connect(via, socket_timeout=1.0, socket_connect_timeout=1.0)
        try:
            assert await client.ping()
            proxy.cut()
            with pytest.raises(BackendUnavailable) as command:
                await client.ping()
            pipe = client.pipeline(transaction=False)
            pipe.get("a-key")
            with pytest.raises(BackendUnavailable) as pipeline:
                await pipe.execute()
            assert (command.value.backend, pipeline.value.backend) == ("redis", "redis")
        finally:
            await client.aclose()


async def test_the_redis_client_retries_dead_pooled_connections_and_gives_up_within_a_second(
    settings: Settings, key_prefix: str
) -> None:
    """Issue 13: the first command after a Redis restart went out on a dead pooled connection
    ("Connection closed by server") and failed; now it is sent again on a new connection. A
    Redis that stays away still surfaces within about a second, for the role's own recovery."""
    key = f"{key_prefix}k"
    async with proxied(settings.redis_url, 6379) as (proxy, via):
        client = redis_client.connect(via)
        try:
            await asyncio.gather(*(client.ping() for _ in range(4)))  # several pooled connections
            proxy.cut()  # every one of them dies, as in a restart
            proxy.restore()
            assert await client.set(key, "x")
            pipe = client.pipeline(transaction=False)
            pipe.get(key)
            pipe.delete(key)
            assert await pipe.execute() == [b"x", 1]
            proxy.cut()  # and now it stays away
            began = time.monotonic()
            with pytest.raises(BackendUnavailable):
                await client.get(key)
            assert time.monotonic() - began < 1.5
            assert proxy.refused == redis_client.RETRIES  # each retry on a new connection
        finally:
            await client.aclose()


def _events(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(getattr(r, "event", "")) for r in caplog.records]


# asyncpg's connect first asks for TLS (sslmode=prefer) through a protocol whose future nobody
# awaits once the connect is cancelled early (here, say, a term's loop cancelled as the term ends
# while its pool opens a connection): asyncio then reports that future. Cancelling a bare
# asyncpg.connect() a few loop turns in gives the same report, 104 times in 400 tries. One such
# report is the library's, not a traceback per retry (CI saw one; 15 runs here saw none).
ASYNCPG_CANCELLED_CONNECT = "unexpected connection_lost() call"


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Records with a traceback, but for at most one report of asyncpg's cancelled connect."""
    with_traceback = [r for r in caplog.records if r.exc_info]
    leaked = [r for r in with_traceback if r.name == "asyncio" and ASYNCPG_CANCELLED_CONNECT in r.getMessage()]
    return [r for r in with_traceback if r not in leaked[:1]]


async def _logged(caplog: pytest.LogCaptureFixture, event: str) -> bool:
    return event in _events(caplog)


async def _refused(proxy: Proxy, count: int) -> bool:
    return proxy.refused >= count


async def test_a_dispatcher_outlives_an_outage_of_more_than_1024_reconnects(settings: Settings) -> None:
    """Issue 22: the reconnect backoff computed `base * 2**attempts`, an OverflowError at attempt
    1,024 that ended the role (a dispatcher whose PostgreSQL was away exited after 6.5 min). With
    a fast backoff, the same 1,024+ failed sessions in seconds: the role is still there, and
    leads again once PostgreSQL answers."""
    reconnect = Backoff(base_s=1e-4, cap_s=1e-4)
    async with proxied(settings.database_url, 5432) as (proxy, via):
        proxy.cut()
        d = Dispatcher(msgspec.structs.replace(settings, database_url=via), reconnect=reconnect)
        task = asyncio.create_task(d.run())
        try:
            await wait_for(lambda: _refused_or_ended(proxy, 1100, task), timeout=40, what="1,100 failed sessions")
            assert not task.done(), f"the role ended: {task.exception()!r}"
            proxy.restore()
            await wait_for(lambda: _leading(d), timeout=10, what="leading once PostgreSQL answers")
            assert not task.done()
        finally:
            d.stop()
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), timeout=10)


async def _refused_or_ended(proxy: Proxy, count: int, task: asyncio.Task[None]) -> bool:
    return proxy.refused >= count or task.done()
