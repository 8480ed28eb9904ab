"""Where the tests' PostgreSQL and Redis come from.

Testcontainers when a Docker engine answers; otherwise the machine's local services
(DATABASE_URL / REDIS_URL or the defaults). Isolation is per test either way: a
database cloned from a migrated template, and a Redis key prefix of its own.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import redis

LOCAL_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class Services:
    pg_admin_dsn: str  # a DSN to the server's `postgres` database
    redis_url: str
    source: str


def with_database(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


@contextlib.contextmanager
def key_prefix_of_its_own(redis_url: str) -> Iterator[str]:
    """A Redis key prefix no other test uses; its keys are deleted when the block ends (the
    shared Redis runs for the whole suite, and CI's for good)."""
    prefix = f"test:{uuid.uuid4().hex[:10]}:"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(redis_url)
        try:
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


def _docker_available() -> bool:
    if os.environ.get("CRONOS_TEST_LOCAL_SERVICES") == "1":
        return False
    if not os.path.exists("/var/run/docker.sock") and not os.environ.get("DOCKER_HOST"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=3)
    except Exception:  # noqa: BLE001 - any failure means "no engine here"
        return False
    try:
        return bool(client.ping())
    except Exception:  # noqa: BLE001
        return False
    finally:
        client.close()


@contextlib.contextmanager
def provide_services() -> Iterator[Services]:
    if _docker_available():
        from testcontainers.postgres import PostgresContainer
        from testcontainers.redis import RedisContainer

        with PostgresContainer("postgres:16", driver=None) as pg, RedisContainer("redis:7") as rd:
            dsn = pg.get_connection_url()
            host, port = rd.get_container_host_ip(), rd.get_exposed_port(6379)
            yield Services(with_database(dsn, "postgres"), f"redis://{host}:{port}/0", "testcontainers")
        return
    pg_dsn = os.environ.get("CRONOS_TEST_DATABASE_URL", LOCAL_PG)
    redis_url = os.environ.get("CRONOS_TEST_REDIS_URL", LOCAL_REDIS)
    yield Services(with_database(pg_dsn, "postgres"), redis_url, "local")
