"""The Redis client every role uses: redis-py's asyncio client whose connection failures
surface as BackendUnavailable("redis"), translated here once for every command, script
and pipeline (as `cronos.store.db.translate_errors` does for PostgreSQL).

A reply error (`ResponseError`: NOGROUP, a script error) is not a connection failure and
passes through unchanged: the module that sent the command knows what it means.

`redis+cluster://host:port` (or `rediss+cluster://`) names a Redis Cluster, reached through
any of its nodes: redis-py's RedisCluster, which answers the same commands Cronos sends (the
keys of one command or script share a hash tag: cronos/keys.py). A cluster with no node for
a slot (a master down, before failover) is unavailable like a server that is down.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ClusterDownError, MasterDownError, SlotNotCoveredError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cronos.errors import BackendUnavailable

# "Redis is not there right now": refused, reset, timed out, closed by the server.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
    # A cluster with a slot nobody serves right now (a master down, failover under way).
    ClusterDownError,
    MasterDownError,
    SlotNotCoveredError,
    TryAgainError,
)
CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn "Redis is unreachable" driver errors into BackendUnavailable (cause kept)."""
    try:
        yield
    except CONNECTION_ERRORS as exc:
        raise BackendUnavailable("redis", f"{type(exc).__name__}: {exc}") from exc


class _Pipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        with translate_errors():
            return await super().execute(raise_on_error)


class Redis(aioredis.Redis):
    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with translate_errors():
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return _Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


class _ClusterPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        with translate_errors():
            return await super().execute(raise_on_error, allow_redirections)


class ClusterRedis(RedisCluster):
    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with translate_errors():
            return await super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> ClusterPipeline:
        # redis-py's typing marks an attribute of it abstract that it sets at run time.
        return _ClusterPipeline(self, transaction)  # type: ignore[abstract]


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


async def server_info(client: Redis, key: str) -> dict[str, Any]:
    """INFO server of the Redis that holds `key` (in a cluster: the master of its slot)."""
    if isinstance(client, RedisCluster):
        return cast(dict[str, Any], await client.info("server", target_nodes=client.get_node_from_key(key)))
    info: dict[str, Any] = await client.info("server")
    return info


# No command waits forever on a server that stopped answering: every read has a socket timeout
# (a blocking command's block time must stay below it: the executor blocks 500 ms), a connect
# has its own, a dead peer is noticed by the kernel (keepalive probes, TCP_USER_TIMEOUT for
# unacknowledged data), and a connection idle for a while is checked with a PING before use.
SOCKET_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 3.0
HEALTH_CHECK_INTERVAL_S = 2
TCP_USER_TIMEOUT_MS = 10_000

# A command that meets a connection error (refused, reset, "Connection closed by server": a
# pooled connection to a Redis that restarted) is sent again on a new connection after a short
# backoff, RETRIES times (about 0.7 s in all): a blip or a dead pooled connection is invisible
# to the caller, and a longer outage still surfaces as BackendUnavailable within a second, for
# the role's own recovery. Such a command never reached a live server, or (a reset after it
# ran) is one Cronos repeats safely: tokens, tick locks and claims are conditional. Timeouts
# are not retried: a server that stopped answering would make every call wait RETRIES times
# its socket timeout, and a timed-out command may have run.
RETRIES = 3
RETRY_BASE_S = 0.05
RETRY_CAP_S = 0.5


def _retry() -> Retry:
    return Retry(ExponentialWithJitterBackoff(cap=RETRY_CAP_S, base=RETRY_BASE_S), RETRIES, (RedisConnectionError,))


def _keepalive_options() -> dict[int, int]:
    wanted = {"TCP_KEEPIDLE": 5, "TCP_KEEPINTVL": 2, "TCP_KEEPCNT": 3, "TCP_USER_TIMEOUT": TCP_USER_TIMEOUT_MS}
    return {option: value for name, value in wanted.items() if (option := getattr(socket, name, None)) is not None}


def connect(url: str, **kwargs: Any) -> Redis:
    """A client for `url` (connections are made on first use, so this never fails for a
    server that is down), with the timeouts above unless the caller passes its own."""
    defaults: dict[str, Any] = {
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_keepalive": True,
        "socket_keepalive_options": _keepalive_options(),
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        "retry": _retry(),
    }
    if url.startswith("unix://"):  # no TCP options on a Unix socket
        del defaults["socket_keepalive"], defaults["socket_keepalive_options"]
    if url.startswith(CLUSTER_SCHEMES):
        # Typed as the plain client: Cronos sends a cluster the same commands (see above).
        return cast(Redis, ClusterRedis.from_url(url.replace("+cluster://", "://", 1), **(defaults | kwargs)))
    client = Redis.from_url(url, **(defaults | kwargs))
    assert isinstance(client, Redis)
    return client
