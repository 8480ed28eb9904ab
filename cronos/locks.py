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


async def acquire_many(client: Any, keys: Sequence[str], owner: str, ttl_ms: int) -> list[bool]:
    """Take many locks in one pipelined round trip; one bool per key, in order."""
    if not keys:
        return []
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.set(key, owner, nx=True, px=ttl_ms)
    return [bool(ok) for ok in await pipe.execute()]


async def renew_many(scripts: Scripts, keys: Sequence[str], owner: str, ttl_ms: int) -> int:
    if not keys:
        return 0
    return int(await scripts.renew_many_if_owner(keys=list(keys), args=[owner, ttl_ms]))


async def release_many(scripts: Scripts, keys: Sequence[str], owner: str) -> int:
    if not keys:
        return 0
    return int(await scripts.release_many_if_owner(keys=list(keys), args=[owner]))
