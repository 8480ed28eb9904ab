"""Shared fixtures: per-test database cloned from a migrated template, per-test Redis prefix."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis

from cronos.settings import Settings
from cronos.store.db import connect, migrate
from tests.services import Services, key_prefix_of_its_own, provide_services, with_database

TEMPLATE = f"cronos_tpl_{os.getpid()}"  # one per process: each pytest-xdist worker has its own
TESTS = Path(__file__).parent
# `make test` runs the suite in two phases: in parallel (pytest-xdist, `-m "not serial"`) every test
# that owns its database and Redis key prefix, then one at a time (`-m serial`) the tests of these
# folders, which time real processes' failovers, leases and restarts or drive a browser against
# deadlines that a busier CPU would make them miss; so do the tests that start `cronos` processes
# (marked `cluster`) wherever they are. Elsewhere a test opts in with @pytest.mark.serial.
SERIAL_FOLDERS = ("cluster", "browser")


def runs_serially(path: Path) -> bool:
    """Whether the test file at `path` belongs to `make test`'s one-at-a-time phase by its folder."""
    return any(TESTS / folder in path.resolve().parents for folder in SERIAL_FOLDERS)


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if runs_serially(item.path) or item.get_closest_marker("cluster"):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(autouse=True)
def root_logging_kept() -> Iterator[None]:
    """A test that runs a role or the CLI in this process (cronos.logs.setup_logging) leaves the root
    logger writing to the stderr pytest captured for it, closed once that test ends; every later
    record then prints "--- Logging error ---" to stderr, where a run's output capture takes it for the
    run's own (tests/integration/test_run_output.py in the whole suite). Each test gets back the root
    logger it started with."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    with provide_services() as found:
        asyncio.run(_create_template(found.pg_admin_dsn))
        try:
            yield found
        finally:
            asyncio.run(_drop_database(found.pg_admin_dsn, TEMPLATE))


async def _create_template(admin_dsn: str) -> None:
    await _drop_database(admin_dsn, TEMPLATE)
    await migrate(with_database(admin_dsn, TEMPLATE))


async def _drop_database(admin_dsn: str, name: str) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture
async def database_url(services: Services) -> AsyncIterator[str]:
    """A fresh, migrated database for this test only."""
    name = f"cronos_t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(services.pg_admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    finally:
        await conn.close()
    yield with_database(services.pg_admin_dsn, name)
    await _drop_database(services.pg_admin_dsn, name)


@pytest.fixture
async def empty_database(services: Services) -> AsyncIterator[str]:
    """A database that does not exist yet (a first install's: `cronos migrate` creates it); dropped after."""
    name = f"cronos_t_{uuid.uuid4().hex[:12]}"
    yield with_database(services.pg_admin_dsn, name)
    await _drop_database(services.pg_admin_dsn, name)


@pytest.fixture
def key_prefix(services: Services) -> Iterator[str]:
    """The test's own Redis key prefix; its keys go once every fixture using it is torn down
    (roles started as processes or tasks write keys until they stop)."""
    with key_prefix_of_its_own(services.redis_url) as prefix:
        yield prefix


@pytest.fixture
async def redis_client(services: Services, key_prefix: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(services.redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def settings(services: Services, database_url: str, key_prefix: str) -> Settings:
    """Settings for one test: its own database and key prefix, short timings."""
    return Settings(
        port=0,
        database_url=database_url,
        redis_url=services.redis_url,
        node_id=f"test-{uuid.uuid4().hex[:6]}",
        key_prefix=key_prefix,
        leader_ttl_ms=1500,
        resync_interval_s=5.0,
        run_lease_s=1.5,
        drain_timeout_s=2.0,
        log_format="text",
        http_allow_nets=("127.0.0.0/8",),  # the tests' receivers listen on loopback (SSRF guard)
    )


@pytest.fixture
async def pg_pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await connect(database_url, min_size=1, max_size=5)
    yield pool
    await pool.close()
