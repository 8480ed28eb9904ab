"""Action routing: an executor takes only tokens it can run.

A task job's token carries its action (`RunToken.action`). Before it locks or claims, an executor
that has no task of that name (cronos.tasks) gives the token up, so it never claims a run only to
fail it "no task registered":

- another live executor of the token's queue announces the action (cronos.presence): the token is
  handed over: re-added to its stream and acknowledged, in one MULTI. Whoever of the group reads
  next gets it (an idle executor blocked on the stream at once). Seen again here, it waits a little
  longer each time before it goes back (the servers may be busy: no hot loop), and after
  MAX_HOPS hand-overs it is left to the watchdog like the next case.
- no live executor of its queue announces it: the token is acknowledged and dropped, and reported
  (a log line per action and minute, `cronos_tokens_unserved_total`, and this node's presence,
  which /api/cluster shows as "no live executor serves action X"). The run stays `queued` in PostgreSQL: the leader's
  watchdog pushes it again with its backoff (3, 6, 12 ... 48 s past due at the defaults), so an
  executor that comes with the action runs it, and the misfire rule applied on that push ends it
  if nobody comes within its grace.

Nothing is lost: the ledger keeps the run queued whatever Redis does with the token, and a token
seen twice costs a denied lock or claim. The success path pays one dictionary look-up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cronos import metrics, presence
from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.stream import EntryRef, RunStream

log = logging.getLogger("cronos.executor.routing")

MAX_HOPS = 8  # hand-overs of one run by this node before it is left to the watchdog
HOP_BASE_S = 0.05  # the wait before the second hand-over of one run; doubled each time, capped
HOP_CAP_S = 1.0
REPORT_S = 60.0  # how long an unserved action stays in this node's presence after it was last seen
_REMEMBERED = 10_000  # runs whose hand-overs are counted at most (the oldest are forgotten first)


def hop_delay_s(hops: int) -> float:
    """How long a token this node already handed over `hops` times waits before it goes back."""
    return 0.0 if hops <= 0 else min(HOP_CAP_S, HOP_BASE_S * 2 ** (hops - 1))


@dataclass(eq=False)
class Routing:
    """This node's side of routing: who else serves what (presence, read at most every `fresh_s`),
    the hand-overs it made, the unserved actions it saw (published with its heartbeat)."""

    client: Any
    keys: Keys
    stream: RunStream
    node_id: str
    fresh_s: float
    clock: Callable[[], float] = time.monotonic
    _roster: list[dict[str, str]] = field(default_factory=list)
    _read_at: float = float("-inf")
    _hops: dict[tuple[int, int], int] = field(default_factory=dict)  # (run id, attempt) -> hand-overs
    unserved: dict[tuple[str, str], float] = field(default_factory=dict)  # (queue, action) -> last seen (unix)
    _warned: dict[tuple[str, str], float] = field(default_factory=dict)  # (queue, action) -> last logged (unix)

    async def decline(self, token: RunToken, entry: EntryRef) -> bool:
        """Give up a token whose action this node has no task for: True when handed over to the
        queue's other executors (re-added and acknowledged), False when none serves it (the caller
        acknowledges it; the run is left to the watchdog)."""
        queue, action = entry[0], token.action or ""
        key = (token.run_id, token.attempt)
        hops = self._hops.get(key, 0)
        if hops < MAX_HOPS and presence.servers(await self._nodes(), queue, action, but=self.node_id):
            await asyncio.sleep(hop_delay_s(hops))
            self._remember(key, hops + 1)
            await self.stream.hand_over(entry, token)
            metrics.TOKENS_HANDED_OVER.labels(queue=queue).inc()
            log.info(
                "no task for action %r here: token handed over",
                action,
                extra={"event": "token.handed_over", "hops": hops + 1},
            )
            return True
        self._hops.pop(key, None)
        now = time.time()
        self.unserved[(queue, action)] = now
        metrics.TOKENS_UNSERVED.labels(queue=queue).inc()
        # A warning per (queue, action) and REPORT_S, not per token: an unserved job firing every
        # second is re-pushed by the watchdog again and again.
        warned = self._warned.get((queue, action))
        if warned is None or now - warned >= REPORT_S:
            self._warned[(queue, action)] = now
            log.warning(
                "no live executor of queue %r serves action %r: run left queued",
                queue,
                action,
                extra={"event": "token.unserved", "queue": queue, "action": action},
            )
        return False

    def reported(self, now: float) -> list[list[str]]:
        """The (queue, action) pairs seen unserved within REPORT_S of `now` (unix), for presence."""
        self.unserved = {k: at for k, at in self.unserved.items() if now - at < REPORT_S}
        self._warned = {k: at for k, at in self._warned.items() if now - at < REPORT_S}
        return [[queue, action] for queue, action in sorted(self.unserved)]

    async def _nodes(self) -> list[dict[str, str]]:
        now = self.clock()
        if now - self._read_at >= self.fresh_s:
            self._roster = await presence.nodes(self.client, self.keys)
            self._read_at = now
        return self._roster

    def _remember(self, key: tuple[int, int], hops: int) -> None:
        self._hops.pop(key, None)
        self._hops[key] = hops  # newest last: the oldest go first
        while len(self._hops) > _REMEMBERED:
            del self._hops[next(iter(self._hops))]
