"""Node presence for the cluster view: each role refreshes a small hash with a TTL."""

from __future__ import annotations

import time
from typing import Any

from cronos.keys import Keys


async def beat(client: Any, keys: Keys, role: str, node_id: str, ttl_s: float, **info: Any) -> None:
    key = keys.node_heartbeat(role, node_id)
    fields = {"role": role, "node_id": node_id, "last_heartbeat": f"{time.time():.3f}"}
    fields.update({k: str(v) for k, v in info.items()})
    pipe = client.pipeline(transaction=False)
    pipe.hset(key, mapping=fields)
    pipe.pexpire(key, int(ttl_s * 1000))
    await pipe.execute()


async def nodes(client: Any, keys: Keys) -> list[dict[str, str]]:
    found = []
    async for key in client.scan_iter(match=keys.node_pattern, count=500):
        raw = await client.hgetall(key)
        if raw:
            found.append({_s(k): _s(v) for k, v in raw.items()})
    return sorted(found, key=lambda n: (n.get("role", ""), n.get("node_id", "")))


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
