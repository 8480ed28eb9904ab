"""The consumers of the run streams' groups: list them, retire one (cronos.consumers says which).

Retiring is one script per consumer and queue (scripts.RETIRE_CONSUMER): its entries pending
past a bound are handed back to the group (re-added, acknowledged), then the consumer is removed
with XGROUP DELCONSUMER if nothing is pending for it any more. Atomic, so no entry is ever pending
for a consumer that no longer exists, and a consumer that became active again in the meantime is
kept. An executor retires itself as it stops (executor.leaving), the leader retires the consumers
of executors that died (dispatcher.consumer_reaper).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from cronos.consumers import Member
from cronos.keys import Keys
from cronos.scripts import Scripts


@dataclass(frozen=True, slots=True)
class Retired:
    handed_back: int  # entries re-added to the stream for the group's other readers
    outcome: str  # removed | pending (entries left: kept) | active (kept) | absent

    @property
    def removed(self) -> bool:
        return self.outcome == "removed"


class StreamMembers:
    def __init__(self, client: Any, keys: Keys, scripts: Scripts | None = None) -> None:
        self._client = client
        self._keys = keys
        self._scripts = scripts or Scripts(client)

    async def of(self, queues: Sequence[str]) -> list[Member]:
        """Every consumer of every queue's group (one pipelined round trip); a queue without its
        stream or group has none."""
        pipe = self._client.pipeline(transaction=False)
        for queue in queues:
            pipe.xinfo_consumers(self._keys.queue_stream(queue), self._keys.group)
        replies = await pipe.execute(raise_on_error=False) if queues else []
        return [
            Member(queue, _text(c.get("name")), int(c.get("pending", 0)), int(c.get("idle", 0)))
            for queue, reply in zip(queues, replies, strict=True)
            if not isinstance(reply, ResponseError)
            for c in reply
        ]

    async def retire(self, queue: str, name: str, *, idle_ms: int, entry_idle_ms: int, limit: int) -> Retired:
        """Retire consumer `name` of `queue` if it has been idle `idle_ms` at least: hand back (up to
        `limit` of) its entries pending `entry_idle_ms` or more, then remove it if none is left."""
        keys = [self._keys.queue_stream(queue)]
        args = [self._keys.group, name, idle_ms, entry_idle_ms, limit]
        handed, outcome = await self._scripts.retire_consumer(keys=keys, args=args)
        return Retired(int(handed), _text(outcome))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
