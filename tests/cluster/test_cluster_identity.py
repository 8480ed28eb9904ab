"""A cluster knows itself (issue 23 item 6): real `cronos` processes on one Redis prefix.

Two databases are two clusters (each has its own id, made by migration 0024); a process whose
prefix already carries the other cluster's id refuses to start with one line. The test
databases are clones of one migrated template, so they share its id: the second cluster's
database is given an id of its own, as a second `cronos migrate` would have made.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg
import pytest
import redis.asyncio as aioredis

from cronos.keys import Keys
from cronos.settings import VARIABLES
from tests.cluster.proxy import Proxy
from tests.cluster.servers import free_port
from tests.conftest import TEMPLATE
from tests.services import Services, with_database
from tests.waiting import wait_for

CRONOS = str(Path(sys.executable).parent / "cronos")
pytestmark = pytest.mark.cluster


class Procs:
    """`cronos` processes of one test, killed at its end whatever happened."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.started: list[subprocess.Popen[str]] = []

    def start(self, command: str, **env: str) -> subprocess.Popen[str]:
        clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
        proc = subprocess.Popen(
            [CRONOS, command],
            cwd=self.cwd,
            env={**clean, "CRONOS_LOG_FORMAT": "json", "CRONOS_LEADER_TTL_MS": "1500", **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.started.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    found = Procs(tmp_path)
    yield found
    found.close()


@pytest.fixture
async def other_database(services: Services) -> AsyncIterator[str]:
    """A second cluster's database: migrated, with an id of its own."""
    name = f"cronos_t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(services.pg_admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    finally:
        await conn.close()
    dsn = with_database(services.pg_admin_dsn, name)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("UPDATE cluster_identity SET id = gen_random_uuid()")
    finally:
        await conn.close()
    yield dsn
    conn = await asyncpg.connect(services.pg_admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def _cluster_id(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        return str(await conn.fetchval("SELECT id::text FROM cluster_identity"))
    finally:
        await conn.close()


def _with_password(dsn: str, password: str) -> str:
    """The DSN with a password (the local server trusts loopback, so any password connects)."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{parts.username or 'postgres'}:{password}@{parts.hostname}:{parts.port}"))


async def _get(url: str) -> tuple[int, dict[str, object]] | None:
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return resp.status, await resp.json()
    except aiohttp.ClientConnectionError:
        return None


async def _held(client: aioredis.Redis, keys: Keys) -> str | None:
    value = await client.get(keys.cluster)
    return value.decode() if value is not None else None


async def _exited(proc: subprocess.Popen[str], timeout: float = 20) -> tuple[int, str]:
    await wait_for(lambda: _aval(proc.poll() is not None), timeout=timeout, what="the process to exit")
    _out, err = proc.communicate()
    return int(proc.returncode), err


async def _aval(value: bool) -> bool:
    return value


async def _logged(proc: subprocess.Popen[str], event: str) -> str:
    """Read the process's stderr up to a JSON line with `event` (stderr stays drained); what was read."""
    assert proc.stderr is not None
    stream = proc.stderr

    def read() -> str:
        seen = []
        for line in stream:
            seen.append(line)
            if f'"event":"{event}"' in line:
                return "".join(seen)
        raise AssertionError(f"process exited before logging {event}: {''.join(seen)}")

    return await asyncio.wait_for(asyncio.to_thread(read), timeout=20)


async def test_a_second_cluster_on_the_same_prefix_refuses_to_start(
    procs: Procs,
    services: Services,
    database_url: str,
    other_database: str,
    key_prefix: str,
    redis_client: aioredis.Redis,
) -> None:
    keys = Keys(key_prefix)
    ours, theirs = await _cluster_id(database_url), await _cluster_id(other_database)
    assert ours != theirs
    env = {"REDIS_URL": services.redis_url, "CRONOS_KEY_PREFIX": key_prefix}
    port = free_port()
    api = procs.start("api", PORT=str(port), DATABASE_URL=database_url, **env)
    started = await _logged(api, "api.listening")
    assert '"event":"cluster.identity"' in started and f'"cluster_id":"{ours}"' in started  # in the startup log
    assert await _held(redis_client, keys) == ours  # the first process claimed the prefix
    cluster = await wait_for(lambda: _get(f"http://127.0.0.1:{port}/api/cluster"), what="/api/cluster")
    assert cluster[0] == 200 and cluster[1]["cluster_id"] == ours

    # Another deployment, its own database, the same prefix: refused, one line naming both.
    dsn = _with_password(other_database, "hunter2-secret")
    for role in ("dispatcher", "api"):
        code, err = await _exited(procs.start(role, PORT=str(free_port()), DATABASE_URL=dsn, **env))
        assert code == 1, err
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"cronos: Redis prefix {key_prefix!r} at "), err
        assert f"belongs to cluster {ours} but database " in last and f"is cluster {theirs}" in last
        assert "CRONOS_KEY_PREFIX" in last
        assert "hunter2" not in err  # the password never reaches the message or the logs
    assert await _held(redis_client, keys) == ours

    # A process of the same cluster starts: its dispatcher leads.
    dispatcher = procs.start("dispatcher", DATABASE_URL=database_url, **env)
    await _logged(dispatcher, "dispatcher.leading")
    dispatcher.send_signal(signal.SIGTERM)
    api.send_signal(signal.SIGTERM)
    assert (await _exited(dispatcher))[0] == 0
    assert (await _exited(api))[0] == 0


async def test_redis_data_loss_writes_the_identity_again(
    procs: Procs,
    services: Services,
    database_url: str,
    other_database: str,
    key_prefix: str,
    redis_client: aioredis.Redis,
) -> None:
    keys = Keys(key_prefix)
    ours = await _cluster_id(database_url)
    env = {"REDIS_URL": services.redis_url, "CRONOS_KEY_PREFIX": key_prefix, "DATABASE_URL": database_url}
    leader = procs.start("dispatcher", **env)
    await _logged(leader, "dispatcher.leading")
    assert await _held(redis_client, keys) == ours

    # Redis loses every key of the prefix (a flush of this test's share of the shared Redis).
    names = [k async for k in redis_client.scan_iter(match=f"{key_prefix}*")]
    await redis_client.delete(*names)
    # The leader notices (its marker or its lock is gone) and writes the identity again.
    assert await wait_for(lambda: _held(redis_client, keys), what="the identity written again") == ours

    # A process of the same cluster starts after the loss (no refusal); the other cluster's still may not.
    executor = procs.start("executor", **env)
    await _logged(executor, "executor.ready")
    code, err = await _exited(procs.start("executor", **{**env, "DATABASE_URL": other_database}))
    assert code == 1 and f"belongs to cluster {ours}" in err.strip().splitlines()[-1], err
    for proc in (executor, leader):
        proc.send_signal(signal.SIGTERM)
        assert (await _exited(proc))[0] == 0


async def test_a_role_waiting_at_start_for_its_database_stops_on_sigterm(
    procs: Procs, services: Services, key_prefix: str
) -> None:
    dsn = f"postgresql://cronos:hunter2-secret@127.0.0.1:{free_port()}/cronos"  # nobody listens there
    env = {"REDIS_URL": services.redis_url, "CRONOS_KEY_PREFIX": key_prefix, "DATABASE_URL": dsn}
    executor = procs.start("executor", **env)
    waiting = await _logged(executor, "backend.waiting")  # the identity cannot be checked yet: it waits
    executor.send_signal(signal.SIGTERM)
    code, err = await _exited(executor)
    assert code == 0, err
    assert "hunter2" not in waiting + err


async def test_the_api_refused_by_postgresql_at_start_still_starts(
    procs: Procs, services: Services, database_url: str, key_prefix: str
) -> None:
    """A login PostgreSQL refuses leaves the API answering 503s, as before the identity check."""
    port = free_port()
    parts = urlsplit(database_url)
    dsn = urlunsplit(parts._replace(netloc=f"no_such_role_{uuid.uuid4().hex[:6]}@{parts.hostname}:{parts.port}"))
    env = {"REDIS_URL": services.redis_url, "CRONOS_KEY_PREFIX": key_prefix, "DATABASE_URL": dsn}
    api = procs.start("api", PORT=str(port), **env)
    started = await _logged(api, "api.listening")
    assert '"event":"cluster.identity_unchecked"' in started
    health = await wait_for(lambda: _get(f"http://127.0.0.1:{port}/health"), what="/health")
    assert health[0] == 503 and health[1]["database"] == "PostgreSQL Disconnected"
    api.send_signal(signal.SIGTERM)
    assert (await _exited(api))[0] == 0


async def test_a_role_started_while_redis_is_away_checks_and_starts_once_it_answers(
    procs: Procs, services: Services, database_url: str, key_prefix: str, redis_client: aioredis.Redis
) -> None:
    proxy = Proxy(urlsplit(services.redis_url).port or 6379).start()
    try:
        proxy.cut()  # every connection refused with an RST until heal()
        via = urlunsplit(urlsplit(services.redis_url)._replace(netloc=f"127.0.0.1:{proxy.port}"))
        env = {"REDIS_URL": via, "CRONOS_KEY_PREFIX": key_prefix}
        dispatcher = procs.start("dispatcher", DATABASE_URL=database_url, **env)
        waiting = await _logged(dispatcher, "backend.waiting")
        assert '"backend":"redis"' in waiting
        proxy.heal()
        await _logged(dispatcher, "dispatcher.leading")
        assert await _held(redis_client, Keys(key_prefix)) == await _cluster_id(database_url)
        dispatcher.send_signal(signal.SIGTERM)
        assert (await _exited(dispatcher))[0] == 0
    finally:
        proxy.stop()
