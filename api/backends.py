"""The API's connections, opened lazily so the API starts and answers while a backend is down.

The PostgreSQL pool is created on first use and again after a failed attempt (at most
once per `retry_s`, so a dead database is not hammered by every request). The Redis
client connects per command; the API only ever reads from Redis (health, cluster view).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

import asyncpg
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from cronos import redis_client
from cronos.errors import BackendUnavailable
from cronos.keys import Keys
from cronos.settings import Settings
from cronos.store.db import connect, mask_dsn
from cronos.store.jobs import JobStore

log = logging.getLogger("cronos.api.backends")

T = TypeVar("T")

# A request must not hang on a dead backend: the client gets a 503 quickly instead.
CONNECT_TIMEOUT_S = 2.0
# Every statement too (asyncpg's command_timeout): a PostgreSQL that stopped answering without
# closing the connection (a silent partition) is a 503 within seconds, not a hung request.
COMMAND_TIMEOUT_S = 3.0
REDIS_TIMEOUT_S = 1.5


class Backends:
    def __init__(self, settings: Settings, *, retry_s: float = 1.0) -> None:
        self.settings = settings
        self.keys = Keys(settings.key_prefix)
        self._pool: asyncpg.Pool | None = None
        self._lock = asyncio.Lock()
        self._retry_s = retry_s
        self._failed_at = -float("inf")
        self._last_error = ""
        self.redis = redis_client.connect(
            settings.redis_url,
            socket_connect_timeout=REDIS_TIMEOUT_S,
            socket_timeout=REDIS_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
        )

    async def pool(self) -> asyncpg.Pool:
        """The pool, creating it when needed; BackendUnavailable when PostgreSQL is down."""
        if self._pool is not None:
            return self._pool
        async with self._lock:
            if self._pool is not None:
                return self._pool
            if time.monotonic() - self._failed_at < self._retry_s:
                raise BackendUnavailable("postgresql", self._last_error)
            try:
                self._pool = await connect(
                    self.settings.database_url,
                    min_size=1,
                    max_size=10,
                    timeout=CONNECT_TIMEOUT_S,
                    command_timeout=COMMAND_TIMEOUT_S,
                    # The API's statements are keyed lookups whose best plan does not depend on the
                    # values: planned once per connection, not per call. A custom plan of a job's
                    # runs spans every day partition (README "Bounded history"): 3.6 ms to plan
                    # over 35 days, 1.3 ms to run. No JIT: a generic plan's estimates (a LIMIT $n is
                    # a tenth of the table) cross its cost threshold, and the console's first page of
                    # a million jobs spent 0.3 s compiling a 0.4 ms statement.
                    server_settings={"plan_cache_mode": "force_generic_plan", "jit": "off"},
                )
            except (BackendUnavailable, asyncpg.PostgresError) as exc:
                # connect() translates "not now" (unreachable, starting up, no database yet);
                # any other refusal (a wrong password, a missing role) leaves the API without
                # a database just the same: a 503 for now and another try soon.
                self._failed_at = time.monotonic()
                self._last_error = str(exc)
                log.warning(
                    "postgresql unreachable",
                    extra={"event": "api.db_unavailable", "dsn": mask_dsn(self.settings.database_url)},
                )
                if isinstance(exc, BackendUnavailable):
                    raise
                raise BackendUnavailable("postgresql", f"{type(exc).__name__}: {exc}") from exc
            log.info("postgresql pool open", extra={"event": "api.db_connected"})
            return self._pool

    async def jobs(self) -> JobStore:
        return JobStore(await self.pool())

    async def redis_call(self, call: Awaitable[T]) -> T:
        """Await one Redis read (maybe several commands) within a deadline.

        The client already turns a failed command into BackendUnavailable; this bounds the
        whole read, so a server that answers too slowly counts as down too.
        """
        try:
            async with asyncio.timeout(REDIS_TIMEOUT_S * 2):
                return await call
        except TimeoutError as exc:  # our own deadline, not a driver error
            raise BackendUnavailable("redis", f"no reply within {REDIS_TIMEOUT_S * 2:g} s") from exc

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
        await self.redis.aclose()
