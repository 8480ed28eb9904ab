"""One owned-lock type (acquire / renew / release) for the leader, tick and job locks.

`SET key owner NX PX ttl` to take it; Lua compare-and-pexpire to renew and
compare-and-delete to release, so a node never extends or frees a lock it lost.
Results are values (bool), not exceptions: being denied is an expected outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cronos.scripts import Scripts


class OwnedLock:
    def __init__(self, client: Any, scripts: Scripts, key: str, owner: str, ttl_ms: int) -> None:
        self._client = client
        self._scripts = scripts
        self.key = key
        self.owner = owner
        self.ttl_ms = ttl_ms

    async def acquire(self) -> bool:
        return bool(await self._client.set(self.key, self.owner, nx=True, px=self.ttl_ms))

    async def renew(self) -> bool:
        return bool(await self._scripts.renew_if_owner(keys=[self.key], args=[self.owner, self.ttl_ms]))

    async def release(self) -> bool:
        return bool(await self._scripts.release_if_owner(keys=[self.key], args=[self.owner]))

    async def holder(self) -> str | None:
        value = await self._client.get(self.key)
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)


async def acquire_many(scripts: Scripts, keys: Sequence[str], owner: str, ttl_ms: int) -> list[bool]:
    """Take many locks in one script call; one bool per key, in order.

    The keys of one call must share a hash slot on a Redis Cluster (group them by slot there).
    """
    if not keys:
        return []
    reply = await scripts.acquire_many_nx(keys=list(keys), args=[owner, ttl_ms])
    flags = reply.decode() if isinstance(reply, bytes) else str(reply)
    return [flag == "1" for flag in flags]


async def renew_many(scripts: Scripts, keys: Sequence[str], owner: str, ttl_ms: int) -> int:
    if not keys:
        return 0
    return int(await scripts.renew_many_if_owner(keys=list(keys), args=[owner, ttl_ms]))


async def release_many(scripts: Scripts, keys: Sequence[str], owner: str) -> int:
    if not keys:
        return 0
    return int(await scripts.release_many_if_owner(keys=list(keys), args=[owner]))
