"""An executor that stops cleanly leaves no trace in Redis: its consumer of each queue's group and
its presence go as it exits (after the drain), so the group does not list every pod that ever ran
and /api/cluster drops the node at once instead of when its heartbeat expires.

Whatever is still pending for this consumer after the drain (tokens given back unclaimed at the
drain deadline, tokens deferred while a backend was away, the entry of a run cancelled past its
grace) is handed back to the group first: re-added to its stream and acknowledged, in the same
script that then removes the consumer (cronos.stream_members). The other executors read those
tokens at once instead of after XAUTOCLAIM's idle time; a token whose run this node had claimed
meets a held tick lock or a claimed run there and is acknowledged (the reaper ends such a run
"executor lost", as before). Never DELCONSUMER with entries pending: that would destroy them.

When Redis does not answer within LEAVE_TIMEOUT_S, the node exits anyway: its consumer is left to
the leader (dispatcher.consumer_reaper), its presence to its ttl.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.exceptions import RedisError

from cronos import presence
from cronos.errors import BackendUnavailable
from cronos.keys import Keys
from cronos.stream_members import Retired, StreamMembers

log = logging.getLogger("cronos.executor")

LEAVE_TIMEOUT_S = 2.0


async def leave(client: Any, keys: Keys, node_id: str, queues: tuple[str, ...], limit: int) -> dict[str, Retired]:
    """Retire this node's consumer of each of `queues` (handing back up to `limit` pending entries
    each), then remove its presence; what became of each consumer (empty when Redis failed)."""
    retired: dict[str, Retired] = {}
    try:
        async with asyncio.timeout(LEAVE_TIMEOUT_S):
            members = StreamMembers(client, keys)
            for queue in queues:
                retired[queue] = await members.retire(queue, node_id, idle_ms=0, entry_idle_ms=0, limit=limit)
            await presence.leave(client, keys, "executor", node_id)
    except (BackendUnavailable, RedisError, TimeoutError) as exc:
        log.warning(
            "could not leave the stream groups: the leader removes the consumer later",
            extra={"event": "executor.leave_failed", "error": f"{type(exc).__name__}: {exc}"},
        )
        return retired
    log.info(
        "left the stream groups",
        extra={
            "event": "executor.left",
            "handed_back": sum(r.handed_back for r in retired.values()),
            "consumers": {queue: r.outcome for queue, r in retired.items()},
        },
    )
    return retired
