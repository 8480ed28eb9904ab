"""One owned-lock type (acquire / renew / release) for the leader and the tick locks.

`SET key owner NX PX ttl` to take it; Lua compare-and-pexpire to renew and
compare-and-delete to release, so a node never extends or frees a lock it lost.
Results are values (bool, counts), not exceptions: being denied is an expected outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cronos.scripts import Scripts


class OwnedLock:
    """One lock (the leader's)."""

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


class TickLocks:
    """The tick locks one node holds, taken, renewed and released a batch per script call.

    The keys of one call must share a hash slot on a Redis Cluster: every tick lock carries
    the `{ticks}` hash tag (cronos.keys).
    """

    def __init__(self, scripts: Scripts, owner: str) -> None:
        self._scripts = scripts
        self.owner = owner

    async def acquire(self, keys: Sequence[str], ttl_ms: int) -> list[bool]:
        """SET NX PX each key; one bool per key, in order (a key this owner holds counts as taken)."""
        if not keys:
            return []
        reply = await self._scripts.acquire_many_nx(keys=list(keys), args=[self.owner, ttl_ms])
        flags = reply.decode() if isinstance(reply, bytes) else str(reply)
        return [flag == "1" for flag in flags]

    async def renew(self, keys: Sequence[str], ttl_ms: int) -> int:
        """Extend those still ours; how many."""
        if not keys:
            return 0
        return int(await self._scripts.renew_many_if_owner(keys=list(keys), args=[self.owner, ttl_ms]))

    async def release(self, keys: Sequence[str]) -> int:
        """Delete those still ours; how many."""
        if not keys:
            return 0
        return int(await self._scripts.release_many_if_owner(keys=list(keys), args=[self.owner]))

    async def queue_release(self, pipeline: Any, keys: Sequence[str]) -> None:
        """Queue `release` on a pipeline (its count comes with the pipeline's replies)."""
        if keys:
            await self._scripts.release_many_if_owner(keys=list(keys), args=[self.owner], client=pipeline)
