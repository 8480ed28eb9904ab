"""Shared fixtures: per-test database cloned from a migrated template, per-test Redis prefix."""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis

from cronos.settings import Settings
from cronos.store.db import connect, migrate
from tests.services import Services, key_prefix_of_its_own, provide_services, with_database

TEMPLATE = f"cronos_tpl_{os.getpid()}"  # one per process: each pytest-xdist worker has its own
TESTS = Path(__file__).parent
# `make test` runs the suite in three groups (docs/development.md). First, in parallel (pytest-xdist,
# `-m "not serial and not paired"`), every test that owns its database and Redis key prefix. Last,
# one at a time (`-m serial`), the tests of these folders, which time real processes' failovers,
# leases and restarts or drive a browser against deadlines that a busier CPU would make them miss;
# so do the tests that start `cronos` processes (marked `cluster`) wherever they are. Elsewhere a
# test opts in with @pytest.mark.serial.
SERIAL_FOLDERS = ("cluster", "browser")
# In between, two at a time (`-m paired`), the files of those tests that only wait for real
# processes to do something, each deadline tens of seconds: a neighbour's CPU does not make them
# miss it, and most of their time is the processes' timers. A file that bounds a delay, a failover or
# a lease stays serial. Paths under tests/.
PAIRED_FILES = frozenset(
    {
        "cluster/test_api_end_to_end.py",
        "cluster/test_api_process.py",
        "cluster/test_apply.py",
        "cluster/test_breaker.py",
        "cluster/test_cli_groups.py",
        "cluster/test_cli_jobs.py",
        "cluster/test_cli_run_logs.py",
        "cluster/test_cli_settings.py",
        "cluster/test_cli_tokens.py",
        "cluster/test_cli_trigger.py",
        "cluster/test_first_hour.py",
        "cluster/test_hashed.py",
        "cluster/test_joins.py",
        "cluster/test_notify_cli.py",
        "cluster/test_notify_end_to_end.py",
        "cluster/test_prometheus_scrape.py",
        "cluster/test_queues.py",
        "cluster/test_schedule_from_step.py",
        "cluster/test_schedules_union.py",
        "cluster/test_task_routing.py",
        "cluster/test_traces.py",
    }
)
# pyproject's 60 s hang guard is for a test alone on the CPU; its own deadlines are unchanged.
PAIRED_TIMEOUT_S = 120
# Soaks and big benchmarks: `make test-long` runs them (marker `long`), `make test` leaves them out.
# A file, or one test of it (FILE::FUNCTION). The overload plateau is an xfail (issue 38): its
# verdict cannot fail a run.
LONG_TESTS = frozenset(
    {
        "cluster/test_overload.py",
        "cluster/test_bench_scale.py::test_bench_herd_starts_every_job_of_the_herd_once",
        "cluster/test_bench_scale.py::test_bench_million_prints_the_leaders_memory_tick_writes_and_page_times",
    }
)


def _under_tests(path: Path) -> str:
    resolved = path.resolve()
    return resolved.relative_to(TESTS).as_posix() if TESTS in resolved.parents else ""


def runs_serially(path: Path) -> bool:
    """Whether the test file at `path` belongs to `make test`'s one-at-a-time phase by its folder."""
    return any(TESTS / folder in path.resolve().parents for folder in SERIAL_FOLDERS)


def runs_paired(path: Path) -> bool:
    """Whether the test file at `path` runs two at a time in `make test` (PAIRED_FILES)."""
    return _under_tests(path) in PAIRED_FILES


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = _under_tests(item.path)
        if path in LONG_TESTS or f"{path}::{getattr(item, 'originalname', item.name)}" in LONG_TESTS:
            item.add_marker(pytest.mark.long)
        if runs_paired(item.path) and not item.get_closest_marker("serial"):  # its own mark wins
            item.add_marker(pytest.mark.paired)
            if not item.get_closest_marker("timeout"):  # the hang guard: it shares the CPU
                item.add_marker(pytest.mark.timeout(PAIRED_TIMEOUT_S))
        elif runs_serially(item.path) or item.get_closest_marker("cluster"):
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


class LaterDrops:
    """Drops the tests' databases on threads of their own, while the next tests run: PostgreSQL's DROP
    DATABASE waits for a checkpoint, seconds of a test's teardown on a busy server, and drops waiting
    at once share one. At most BACKLOG wait, so the session's end waits for few; it fails if one failed."""

    THREADS = 4
    BACKLOG = 8

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.pool = ThreadPoolExecutor(max_workers=self.THREADS, thread_name_prefix="drop-database")
        self.pending: collections.deque[Future[None]] = collections.deque()

    def drop(self, name: str) -> None:
        self.pending.append(self.pool.submit(lambda: asyncio.run(_drop_database(self.admin_dsn, name))))
        while len(self.pending) > self.BACKLOG or (self.pending and self.pending[0].done()):
            self.pending.popleft().result()  # raises what that DROP DATABASE raised

    def wait(self) -> None:
        self.pool.shutdown(wait=True)
        while self.pending:
            self.pending.popleft().result()


@pytest.fixture(scope="session")
def later_drops(services: Services) -> Iterator[LaterDrops]:
    drops = LaterDrops(services.pg_admin_dsn)
    try:
        yield drops
    finally:
        drops.wait()


@pytest.fixture
async def database_url(services: Services, later_drops: LaterDrops) -> AsyncIterator[str]:
    """A fresh, migrated database for this test only."""
    name = f"cronos_t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(services.pg_admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    finally:
        await conn.close()
    yield with_database(services.pg_admin_dsn, name)
    later_drops.drop(name)


@pytest.fixture
def empty_database(services: Services, later_drops: LaterDrops) -> Iterator[str]:
    """A database that does not exist yet (a first install's: `cronos migrate` creates it); dropped after."""
    name = f"cronos_t_{uuid.uuid4().hex[:12]}"
    yield with_database(services.pg_admin_dsn, name)
    later_drops.drop(name)


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
