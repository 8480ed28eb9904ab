"""The Redis client every role uses: redis-py's asyncio client whose connection failures
surface as BackendUnavailable("redis"), translated here once for every command, script
and pipeline (as `cronos.store.db.translate_errors` does for PostgreSQL).

A reply error (`ResponseError`: NOGROUP, a script error) is not a connection failure and
passes through unchanged: the module that sent the command knows what it means.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cronos.errors import BackendUnavailable

# "Redis is not there right now": refused, reset, timed out, closed by the server.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)


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


def connect(url: str, **kwargs: Any) -> Redis:
    """A client for `url` (connections are made on first use, so this never fails for a
    server that is down)."""
    client = Redis.from_url(url, **kwargs)
    assert isinstance(client, Redis)
    return client
