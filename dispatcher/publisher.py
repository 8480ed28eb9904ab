"""Pushes run tokens onto the stream after the ledger committed them, and notices Redis data loss."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from typing import Any

from cronos import metrics, presence, redis_client
from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.models import DEFAULT_QUEUE
from cronos.store import identity
from cronos.store.ledger import QueuedRun
from cronos.store.queues import orphaned
from cronos.stream import RunStream

log = logging.getLogger("dispatcher.publisher")

# An orphaned queue is dropped once its newest entry is this old: one just named and pushed to
# (after the pass read which queues jobs name) is never taken for an orphan.
ORPHAN_AGE_MS = 60_000
LAG_SAMPLES = 64  # lag observations per published batch at most (every token in batches up to 127)


def token_of(run: QueuedRun, epoch: int, *, due_ms: int | None) -> RunToken:
    """The token of a queued run, pushed in `epoch`; `due_ms` may be ahead (the push lead): the
    executor claims it then (None: when it reads it)."""
    return RunToken(
        run_id=run.id,
        job_id=run.job_id,
        scheduled_for_ms=run.scheduled_for_ms,
        attempt=run.attempt,
        trigger=run.trigger,
        epoch=epoch,
        due_ms=due_ms,
        action=run.action,
        expires_ms=run.expires_ms,
        shell=run.shell,
        written_ms=run.written_ms,
        host=run.host,
    )


class Publisher:
    def __init__(
        self,
        client: Any,
        keys: Keys,
        clock: Callable[[], float] = time.time,
        *,
        cluster_id: str | None = None,
        orphan_age_ms: int = ORPHAN_AGE_MS,
    ) -> None:
        self._client = client
        self._orphan_age_ms = orphan_age_ms
        self._keys = keys
        self._cluster_id = cluster_id  # written again with the marker (cronos.identity)
        self._clock = clock  # unix time by the clock due times are judged by (PostgreSQL's)
        self.stream = RunStream(client, keys)
        self._run_id: str | None = None
        self._prepared: set[str] = set()  # queues whose group and name are in Redis (since prepare())
        # Held while a queue is prepared and pushed to, and while one is dropped: a drop never
        # falls between a push's group creation and its XADD (which would make a stream without
        # a group).
        self._queues_lock = asyncio.Lock()

    async def publish(self, runs: Sequence[QueuedRun], epoch: int) -> int:
        """Push each run's token onto the stream of its job's queue."""
        if not runs:
            return 0
        by_queue: dict[str, list[RunToken]] = defaultdict(list)
        for r in runs:
            by_queue[r.queue].append(token_of(r, epoch, due_ms=r.due_ms))
        pushed = 0
        async with self._queues_lock:
            for queue, tokens in by_queue.items():
                await self._prepare_queue(queue)
                pushed += await self.stream.publish(tokens, queue)
        now_ms = self._clock() * 1000
        metrics.TICKS_DISPATCHED.inc(pushed)
        # A sample of a big batch is enough for the histogram's shape, and costs 1/100th of it.
        observe = metrics.DISPATCH_LAG.observe
        step = max(1, len(runs) // LAG_SAMPLES)
        for r in runs[::step]:
            observe(max(0.0, now_ms - r.due_ms) / 1000)
        return pushed

    async def _prepare_queue(self, queue: str) -> None:
        """A queue's first push since prepare(): its group exists (so its lag shows while no
        executor serves it) and its name is listed for housekeeping and /api/cluster."""
        if queue in self._prepared:
            return
        await self.stream.ensure_group(queue)
        await self.stream.list_queue(queue)
        self._prepared.add(queue)

    async def queues(self) -> list[str]:
        """The queues pushed to since Redis last lost its data, the default one first."""
        return await self.stream.known_queues()

    async def prepare(self) -> None:
        """On election: the groups exist, and the marker records which Redis we pushed to."""
        self._prepared.clear()
        for queue in await self.queues():
            await self._prepare_queue(queue)
        self._run_id = await self._server_run_id()
        await self._client.set(self._keys.redis_marker, self._run_id)
        if self._cluster_id is not None:
            await self._claim_identity(self._cluster_id)

    async def _claim_identity(self, cluster_id: str) -> None:
        """Redis that lost its data lost the cluster identity too: write it again. Another
        cluster's, written meanwhile, is logged (its processes refuse to start; this one runs on)."""
        held = await identity.claim(self._client, self._keys, cluster_id)
        if held is not None and held != cluster_id:
            log.error(
                "these redis keys belong to another cluster",
                extra={"event": "cluster.identity_conflict", "cluster_id": cluster_id, "redis_cluster_id": held},
            )

    async def data_lost(self) -> str | None:
        """Why Redis no longer holds what we pushed (restart, flush), or None when it does."""
        marker = await self._client.get(self._keys.redis_marker)
        run_id = await self._server_run_id()
        reason = None
        if marker is None:
            reason = "marker key missing"
        elif self._run_id is not None and run_id != self._run_id:
            reason = "redis run_id changed"
        else:
            for queue in sorted(self._prepared | {DEFAULT_QUEUE}):
                if not await self.stream.group_exists(queue):
                    reason = "stream or group missing" + ("" if queue == DEFAULT_QUEUE else f" (queue {queue})")
                    break
        if reason is not None:
            await self.prepare()
        return reason

    async def executors(self) -> list[dict[str, str]]:
        """Every live node's presence (the per-host jobs' hosts are chosen among its executors)."""
        return await presence.nodes(self._client, self._keys)

    async def lagging(self, queues: Sequence[str]) -> list[str]:
        """Those of `queues` whose stream holds tokens no executor has read yet."""
        return [queue for queue in queues if (await self.stream.info(queue)).lag]

    async def housekeeping(self, named: Collection[str]) -> int:
        """Trim acknowledged entries (never pending ones), drop the queues no job names (`named`)
        once their stream is empty, or whatever it holds once they are orphaned too (no live
        executor reads them), and export the gauges of every other queue's stream; the longest
        stream's length."""
        longest = 0
        served: set[str] | None = None  # the queues live executors read: looked up once a pass, if needed
        for queue in await self.queues():
            await self.stream.trim_acknowledged(queue)
            if queue not in named:
                if await self._drop(queue):
                    continue
                if served is None:
                    served = {q for n in await presence.nodes(self._client, self._keys) for q in presence.queues_of(n)}
                if orphaned(queue, named, served) and await self._drop(queue, orphan=True):
                    continue
            info = await self.stream.info(queue)
            metrics.STREAM_LENGTH.labels(queue=queue).set(info.length)
            metrics.STREAM_PENDING.labels(queue=queue).set(info.pending)
            metrics.STREAM_LAG.labels(queue=queue).set(info.lag or 0)
            longest = max(longest, info.length)
        return longest

    async def _drop(self, queue: str, *, orphan: bool = False) -> bool:
        """Drop `queue` (its stream, its name, its series) if its stream is empty, or, an `orphan`,
        if its newest entry is older than the orphan age (ORPHAN_AGE_MS); True if dropped. A queue left behind by
        deleted jobs otherwise costs every pass, /api/cluster and /metrics forever (issue 22: 1,000
        of them, a quarter of a core idle). A job naming it later makes it again with its first push."""
        entries: int | None = 0
        async with self._queues_lock:
            if orphan:
                entries = await self.stream.drop_if_stale(queue, self._orphan_age_ms)
                if entries is None:
                    return False
            elif not await self.stream.drop_if_empty(queue):
                return False
            self._prepared.discard(queue)
        metrics.forget_queue(queue)
        if orphan:
            log.warning(
                "orphaned queue dropped: no job names it and no executor reads it",
                extra={"event": "queue.orphan_dropped", "queue": queue, "entries": entries},
            )
        else:
            log.info("queue dropped: no job names it", extra={"event": "queue.dropped", "queue": queue})
        return True

    async def _server_run_id(self) -> str:
        # The server holding the streams (in a cluster, the master of their slot).
        info = await redis_client.server_info(self._client, self._keys.stream)
        return str(info.get("run_id", ""))
