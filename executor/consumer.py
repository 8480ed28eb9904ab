"""Stream consumption: never more tokens in hand than the prefetch bound, own pending first.

Each delivery becomes one `pipeline.process` task in the role's task group. Entries
left idle by a dead consumer are taken over with XAUTOCLAIM. When PostgreSQL or Redis
fails, reading pauses until the backend answers again; a token that failed meanwhile is
retried by its own task the moment it does (`pipeline.process`), and this consumer re-reads
its own pending entries for any it no longer holds (after a restart), so nothing deferred
by a blip waits to idle out for XAUTOCLAIM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter

from cronos import metrics
from cronos.aio import wait_any
from cronos.backoff import RECONNECT_CAP_S, Backoff
from cronos.errors import BackendUnavailable
from cronos.stream import Delivery, EntryRef
from executor.deps import Deps
from executor.pipeline import Ended, TokenOutcome, process

log = logging.getLogger("cronos.executor.consumer")

READ_BLOCK_MS = 500  # how long one XREADGROUP waits (on average); also bounds how fast a stop is noticed
# At most this many tokens per read: a burst is then shared by every executor instead of
# being swallowed by the first one, and its first runs start while the rest are still read.
READ_BATCH = 200
# At light load each second's tokens arrive while the executors wait in XREADGROUP, and Redis hands
# them to the reader that has waited longest (up to its COUNT: all of them). With one fixed timeout,
# the executor that took a second's tokens re-blocks right after, times out and re-blocks in step with
# the pushes (a second is two timeouts), and is the longest waiting again at the next push: it took
# every second's runs (10 executors, 200 jobs: one ran 60 % of them, four none). A timeout drawn
# anew each time changes who has waited longest from push to push: each executor takes a fair share
# of the seconds (10 executors: 7-12 % each over 5 minutes), and a burst still goes out in one claim.
READ_BLOCK_JITTER = 0.5  # each read blocks READ_BLOCK_MS times 1 +- this


class Consumer:
    def __init__(self, deps: Deps, prefetch: int) -> None:
        self._deps = deps
        self._stream = deps.stream
        self._prefetch = prefetch
        # Read again once this many are free, not token by token as each one ends: a read per
        # token would cost a round trip each and shrink every later batch to one.
        self._refill = max(1, min(READ_BATCH, prefetch // 10))
        self._entries: set[EntryRef] = set()  # entries being processed here
        self._held: Counter[str] = Counter({q: 0 for q in deps.stream.queues})  # of them, per queue
        self._tasks: set[asyncio.Task[Ended]] = set()
        self._freed = asyncio.Event()
        self.outcomes: Counter[Ended] = Counter()
        self.autoclaim_idle_ms = int(deps.lease_s * 2000)
        self._last_autoclaim = 0.0
        self.autoclaims = 0  # XAUTOCLAIM passes made (tests wait on it)
        self._random = random.Random()

    @property
    def free(self) -> int:
        return self._prefetch - len(self._entries)

    async def serve(self, group: asyncio.TaskGroup, stopping: asyncio.Event, *, burst: bool = False) -> None:
        """Read and dispatch until `stopping` is set (or, in burst mode, until nothing is left)."""
        backoff = Backoff(base_s=0.1, cap_s=RECONNECT_CAP_S)  # reads failing while the probe succeeds: no tight loop
        own_pending = True  # after a start or a backend failure: what this consumer holds first
        while not stopping.is_set():
            try:
                if self._deps.health.troubled:
                    if not await self._deps.health.recover(stopping):
                        break  # stopped while a backend was away
                    own_pending = True
                if not await self._wait_free(stopping):
                    break
                deliveries = await self._read(pending=own_pending, block=not burst)
                self._spawn(group, deliveries)
                if own_pending:
                    own_pending = False
                    continue
                backoff.reset()
            except BackendUnavailable as exc:  # reading pauses until it answers (health.recover)
                self._deps.health.report(exc)
                log.warning("stream read failed: %s", exc, extra={"event": "stream.read_failed"})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), timeout=backoff.next_delay())
                continue
            if burst and not deliveries and not self._tasks:
                break
            if burst and not deliveries:
                await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)

    async def _read(self, *, pending: bool, block: bool) -> list[Delivery]:
        free = self.free
        if pending:
            # What this consumer held and never acknowledged (after a restart, or tokens deferred
            # while a backend was away). It never held more than its prefetch, so one read takes
            # it all; anything beyond is reclaimed by XAUTOCLAIM.
            return await self._stream.read(self._deps.node_id, free, None, pending=True)
        now = time.monotonic()
        if now - self._last_autoclaim >= self._deps.lease_s:
            self._last_autoclaim = now
            claimed = await self._stream.autoclaim(self._deps.node_id, self.autoclaim_idle_ms, free)
            self.autoclaims += 1
            claimed = [d for d in claimed if d.ref not in self._entries]
            if claimed:
                log.info("took over idle entries", extra={"event": "stream.autoclaimed", "count": len(claimed)})
                return claimed
        return await self._stream.read(self._deps.node_id, min(free, READ_BATCH), self._block_ms() if block else None)

    def _block_ms(self) -> int:
        return round(READ_BLOCK_MS * (1 + self._random.uniform(-READ_BLOCK_JITTER, READ_BLOCK_JITTER)))

    def _spawn(self, group: asyncio.TaskGroup, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            if delivery.ref in self._entries:
                continue  # already being processed here (re-read while pending)
            self._entries.add(delivery.ref)
            self._held[delivery.queue] += 1
            task = group.create_task(self._guarded(delivery), name=f"token:{delivery.queue}:{delivery.entry_id!r}")
            self._tasks.add(task)
        for queue, held in self._held.items():
            metrics.STREAM_PENDING.labels(queue=queue).set(held)

    async def _guarded(self, delivery: Delivery) -> Ended:
        try:
            outcome = await process(delivery, self._deps)
        except Exception:  # a bug must not take the role down; the entry stays pending
            log.exception("token processing failed", extra={"event": "token.error"})
            outcome = TokenOutcome.ERROR
        finally:
            if delivery.ref in self._entries:
                self._entries.discard(delivery.ref)
                self._held[delivery.queue] -= 1
            task = asyncio.current_task()
            if task is not None:
                self._tasks.discard(task)
            self._freed.set()
        self.outcomes[outcome] += 1
        return outcome

    async def _wait_free(self, stopping: asyncio.Event) -> bool:
        while self.free < self._refill:
            self._freed.clear()
            await wait_any(stopping, self._freed)
            if stopping.is_set():
                return False
        return True

    async def drain(self, timeout_s: float) -> int:
        """Wait for in-flight tokens up to `timeout_s` (tokens held for their due time, at most
        the push lead away, start meanwhile); then give back those still held and cancel the
        work of the rest (they still record their outcome, release and acknowledge). A token
        still not done after another `timeout_s` is cancelled: its entry stays pending for
        another executor, and the node exits instead of hanging. Returns how many runs were
        cancelled."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
        if self._tasks and (given := self._deps.gate.withdraw()):
            log.info("held tokens given back", extra={"event": "executor.given_back", "count": given})
        self._deps.health.close()  # tokens waiting for a backend to answer are left pending
        cancelled = 0
        for flight in list(self._deps.in_flight.values()):
            flight.cancel("cancelled: executor shutting down")
            cancelled += 1
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
        if stuck := set(self._tasks):
            log.warning(
                "tokens still in hand after the drain: cancelled, left pending",
                extra={
                    "event": "executor.drain_cancelled",
                    "count": len(stuck),
                    "tasks": sorted(t.get_name() for t in stuck),
                },
            )
            for task in stuck:
                task.cancel()
            await asyncio.wait(stuck)
        return cancelled
