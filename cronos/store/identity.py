"""The cluster identity's I/O (the decision is cronos.identity): read from PostgreSQL, where
migration 0024 made it, and claimed in Redis with SET NX by the first process to start (and by
the leader again after Redis lost its data)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import asyncpg
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from cronos import redis_client
from cronos.backoff import RECONNECT_CAP_S, Backoff
from cronos.errors import BackendUnavailable, ConfigError
from cronos.identity import mismatch
from cronos.keys import Keys
from cronos.redact import redact_url
from cronos.settings import Settings
from cronos.store.db import connect_one, translate_errors
from cronos.store.queries import upkeep as upkeep_q

log = logging.getLogger("cronos.identity")

TIMEOUT_S = 5.0  # each backend's connect and reply at start


async def database_id(conn: asyncpg.Pool | asyncpg.Connection) -> str:
    """The database's cluster id; BackendUnavailable (run `cronos migrate`) before migration 0024."""
    with translate_errors():
        found = await conn.fetchval(upkeep_q.CLUSTER_IDENTITY)
    if found is None:  # the row was deleted by hand: nothing to compare with
        raise ConfigError("table cluster_identity is empty: restore its row (the id Redis holds)")
    return str(found)


async def claim(client: Any, keys: Keys, cluster_id: str) -> str | None:
    """Write `cluster_id` under the prefix unless an id is there already; the id Redis holds
    (None only if Redis lost it again in between)."""
    if await client.set(keys.cluster, cluster_id, nx=True):
        return cluster_id
    held = await client.get(keys.cluster)
    return held.decode() if isinstance(held, bytes) else held


async def check(settings: Settings) -> str:
    """This process's cluster id, once its Redis keys are known to be its own (claimed if
    unclaimed); ClusterMismatch when they are another cluster's, BackendUnavailable when a
    backend does not answer."""
    conn = await connect_one(settings.database_url, timeout=TIMEOUT_S, command_timeout=TIMEOUT_S)
    try:
        cluster_id = await database_id(conn)
    finally:
        await conn.close()
    client = redis_client.connect(  # one try: the caller decides whether to wait for Redis
        settings.redis_url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S, retry=Retry(NoBackoff(), 0)
    )
    try:
        held = await claim(client, Keys(settings.key_prefix), cluster_id)
    finally:
        await client.aclose()
    refusal = mismatch(
        cluster_id, held, database_url=settings.database_url, redis_url=settings.redis_url, prefix=settings.key_prefix
    )
    if refusal is not None:
        raise refusal
    log.info(
        "cluster identity checked",
        extra={
            "event": "cluster.identity",
            "cluster_id": cluster_id,
            "key_prefix": settings.key_prefix,
            "database": redact_url(settings.database_url),
            "redis": redact_url(settings.redis_url),
        },
    )
    return cluster_id


async def gate(settings: Settings, *, wait: bool, stopping: asyncio.Event) -> bool:
    """The check at a process's start: True to go on, ClusterMismatch to refuse. A backend that
    does not answer is waited for (`wait`: a dispatcher or executor waits for it anyway) until
    `stopping` is set (then False), or, without `wait`, logged and passed (the API answers while
    a backend is down; it writes only to PostgreSQL, and the roles that use the keys check)."""
    backoff = Backoff(base_s=0.1, cap_s=RECONNECT_CAP_S)  # a role starts soon after its backend answers
    logged = ""
    while True:
        try:
            async with asyncio.timeout(TIMEOUT_S * 2):
                await check(settings)
            return True
        except (BackendUnavailable, TimeoutError, asyncpg.PostgresError, RedisError) as exc:
            # A refused login (a wrong password, a missing role, a Redis user that may not SET) is the
            # API's 503 like a backend that is down; a dispatcher or executor fails on it as before.
            if isinstance(exc, asyncpg.PostgresError | RedisError) and wait:
                raise
            error = str(exc) or "no reply"
            if not wait:
                log.warning(
                    "cluster identity not checked: a backend is unavailable",
                    extra={"event": "cluster.identity_unchecked", "error": error},
                )
                return True
            delay = backoff.next_delay()
            if error != logged:  # once per cause, not every half second
                logged = error
                log.warning(
                    "a backend is unavailable at start, waiting for it: %s",
                    error,
                    extra={"event": "backend.waiting", "backend": getattr(exc, "backend", "")},
                )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await stopping.wait()
            if stopping.is_set():
                return False
