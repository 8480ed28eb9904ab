"""Routing by capability: an executor takes only tokens it can run.

A token carries what its run needs beside its queue: a task job's action (`RunToken.action`), a
shell job's flag (`RunToken.shell`). Before it locks or claims, an executor that cannot run it
(`cronos.presence.can_run`: no task of that name here, or shell jobs not allowed here) gives the
token up, so it never claims a run only to fail it ("no task registered", "shell jobs are
disabled on this executor"):

- another live executor of the token's queue announces it can run it (cronos.presence): the token
  is handed over: re-added to its stream and acknowledged, in one MULTI. Whoever of the group reads
  next gets it (an idle executor blocked on the stream at once). Seen again here, it waits a little
  longer each time before it goes back (the servers may be busy: no hot loop), and after
  MAX_HOPS hand-overs it is left to the watchdog like the next case.
- a per-host run (`RunToken.host`) goes only to its host; with its host gone it is acknowledged
  and left queued (not reported unserved: the job is served, that host is not there), and ends
  `skipped` "expired" once its grace is over.
- no live executor of its queue can run it: the token is acknowledged and dropped, and reported
  (a log line per need and minute, `cronos_tokens_unserved_total`, and this node's presence,
  which /api/cluster shows as "no live executor of queue Q serves action X" or "... runs shell
  jobs"). The run stays `queued` in PostgreSQL: the leader's
  watchdog pushes it again with its backoff (3, 6, 12 ... 48 s past due at the defaults), so an
  executor that comes able to run it runs it, and the misfire rule applied on that push ends it
  if nobody comes within its grace.

Nothing is lost: the ledger keeps the run queued whatever Redis does with the token, and a token
seen twice costs a denied lock or claim. The success path pays one `can_run`.
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
REPORT_S = 60.0  # how long an unserved need stays in this node's presence after it was last seen
_REMEMBERED = 10_000  # runs whose hand-overs are counted at most (the oldest are forgotten first)


def hop_delay_s(hops: int) -> float:
    """How long a token this node already handed over `hops` times waits before it goes back."""
    return 0.0 if hops <= 0 else min(HOP_CAP_S, HOP_BASE_S * 2 ** (hops - 1))


@dataclass(eq=False)
class Routing:
    """This node's side of routing: who else serves what (presence, read at most every `fresh_s`),
    the hand-overs it made, the unserved needs it saw (published with its heartbeat)."""

    client: Any
    keys: Keys
    stream: RunStream
    node_id: str
    fresh_s: float
    clock: Callable[[], float] = time.monotonic
    _roster: list[dict[str, str]] = field(default_factory=list)
    _read_at: float = float("-inf")
    _hops: dict[tuple[int, int], int] = field(default_factory=dict)  # (run id, attempt) -> hand-overs
    unserved: dict[presence.Needs, float] = field(default_factory=dict)  # -> last seen (unix)
    _warned: dict[presence.Needs, float] = field(default_factory=dict)  # -> last logged (unix)

    async def decline(self, token: RunToken, entry: EntryRef) -> bool:
        """Give up a token this node cannot run: True when handed over to the queue's other
        executors (re-added and acknowledged), False when none can run it (the caller
        acknowledges it; the run is left to the watchdog)."""
        needs = presence.Needs(entry[0], token.action, token.shell, token.host)
        queue = needs.queue
        key = (token.run_id, token.attempt)
        hops = self._hops.get(key, 0)
        if hops < MAX_HOPS and presence.servers(await self._nodes(), needs, but=self.node_id):
            await asyncio.sleep(hop_delay_s(hops))
            self._remember(key, hops + 1)
            await self.stream.hand_over(entry, token)
            metrics.TOKENS_HANDED_OVER.labels(queue=queue).inc()
            log.info(
                "cannot run it here (%s): token handed over",
                needs.what(),
                extra={"event": "token.handed_over", "hops": hops + 1},
            )
            return True
        self._hops.pop(key, None)
        if needs.host is not None:  # its host left: not a need nobody serves (the run expires queued)
            log.info("its host is gone: run left queued", extra={"event": "token.host_gone", "host": needs.host})
            return False
        now = time.time()
        self.unserved[needs] = now
        metrics.TOKENS_UNSERVED.labels(queue=queue).inc()
        # A warning per need and REPORT_S, not per token: an unserved job firing every second is
        # re-pushed by the watchdog again and again.
        warned = self._warned.get(needs)
        if warned is None or now - warned >= REPORT_S:
            self._warned[needs] = now
            log.warning(
                "%s: run left queued",
                presence.unserved_message(needs),
                extra={"event": "token.unserved", "queue": queue, "action": token.action, "shell": token.shell},
            )
        return False

    def reported(self, now: float) -> list[list[str | None]]:
        """What was seen unserved within REPORT_S of `now` (unix), for presence (Needs.entry)."""
        self.unserved = {k: at for k, at in self.unserved.items() if now - at < REPORT_S}
        self._warned = {k: at for k, at in self._warned.items() if now - at < REPORT_S}
        return sorted((needs.entry() for needs in self.unserved), key=str)

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
