"""The leader removes the stream-group consumers that executors left behind when they did not stop
cleanly (kill -9, OOM, a node lost): in Kubernetes every pod is a new consumer name, and without
this the groups grow with every rollout (XINFO CONSUMERS, /api/cluster's `consumers`).

Each pass lists every queue's consumers and the live executors (cronos.presence), and retires the
consumers cronos.consumers picks: idle past CRONOS_CONSUMER_IDLE_REMOVE_S and not present. Their
entries still pending that long are handed back to the group first, and the consumer is removed
only once nothing is pending for it (cronos.stream_members: one script, which also keeps it if it
became active meanwhile). By then the live executors have normally taken its entries over with
XAUTOCLAIM (2 run leases); handing back covers a queue no live executor serves.

Fenced like the other loops of a term: a node whose lease is stale stops before it retires anything.
A pass that fails otherwise is logged and tried again at the next one: it never ends the term.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from cronos import presence
from cronos.consumers import Member, to_retire, verdict
from cronos.errors import BackendUnavailable, NotLeader
from cronos.keys import Keys
from cronos.stream_members import Retired, StreamMembers
from dispatcher.election import LeadershipLost
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.consumer_reaper")

PASS_S = 30.0  # a pass at most this often: a dead consumer goes within its bound plus this
RETIRE_LIMIT = 1000  # entries handed back per consumer and pass (the rest at the next one)


class ConsumerReaper:
    def __init__(
        self,
        client: Any,
        keys: Keys,
        queues: Callable[[], Awaitable[Sequence[str]]],
        check: Callable[[], int],
        idle_bound_s: float,
    ) -> None:
        self._client = client
        self._keys = keys
        self._queues = queues  # the queues the leader pushed to (the publisher's)
        self._check = check  # the epoch, or LeadershipLost
        self._members = StreamMembers(client, keys)
        self.idle_bound_ms = int(idle_bound_s * 1000)
        self.interval_s = min(PASS_S, max(idle_bound_s / 3, 0.2))
        self._failing = False

    async def run(self, term: Lifetime) -> None:
        while True:
            await term.sleep(self.interval_s)
            try:
                await self.once()
            except (LeadershipLost, NotLeader):
                raise
            except Exception as exc:  # never ends the term: logged (the traceback once), tried again
                log.warning(
                    "consumer reaping failed",
                    exc_info=not self._failing and not isinstance(exc, BackendUnavailable),
                    extra={"event": "stream.consumer_reap_failed", "error": f"{type(exc).__name__}: {exc}"},
                )
                self._failing = True
            else:
                self._failing = False

    async def once(self) -> list[tuple[Member, Retired]]:
        """One pass: retire the consumers of executors gone past the bound; what became of each."""
        self._check()
        members = await self._members.of(list(await self._queues()))
        if not members:
            return []
        found = await presence.nodes(self._client, self._keys)
        present = {n.get("node_id", "") for n in found if n.get("role") == "executor"}
        done = []
        for member in to_retire(members, present, self.idle_bound_ms):
            self._check()
            bound = self.idle_bound_ms
            retired = await self._members.retire(
                member.queue, member.name, idle_ms=bound, entry_idle_ms=bound, limit=RETIRE_LIMIT
            )
            done.append((member, retired))
            if retired.removed or retired.handed_back:
                removed = retired.removed
                log.info(
                    "gone executor's consumer removed" if removed else "gone executor's entries handed back",
                    extra={
                        "event": "stream.consumer_removed" if removed else "stream.consumer_handed_back",
                        "queue": member.queue,
                        "consumer": member.name,
                        "idle_s": round(member.idle_ms / 1000, 1),
                        "handed_back": retired.handed_back,
                        "verdict": verdict(member, present, bound),
                    },
                )
        return done
