"""Pushes run tokens onto the stream after the ledger committed them, and notices Redis data loss."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from cronos import metrics, redis_client
from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.store.ledger import QueuedRun
from cronos.stream import RunStream

log = logging.getLogger("dispatcher.publisher")

LAG_SAMPLES = 64  # lag observations per published batch at most (every token in batches up to 127)


class Publisher:
    def __init__(self, client: Any, keys: Keys, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._keys = keys
        self._clock = clock  # unix time by the clock due times are judged by (PostgreSQL's)
        self.stream = RunStream(client, keys)
        self._run_id: str | None = None

    async def publish(self, runs: Sequence[QueuedRun], epoch: int) -> int:
        if not runs:
            return 0
        tokens = [
            RunToken(
                run_id=r.id,
                job_id=r.job_id,
                scheduled_for_ms=r.scheduled_for_ms,
                attempt=r.attempt,
                trigger=r.trigger,
                epoch=epoch,
                due_ms=r.due_ms,  # may be ahead (the push lead): the executor claims it then
            )
            for r in runs
        ]
        pushed = await self.stream.publish(tokens)
        now_ms = self._clock() * 1000
        metrics.TICKS_DISPATCHED.inc(pushed)
        # A sample of a big batch is enough for the histogram's shape, and costs 1/100th of it.
        observe = metrics.DISPATCH_LAG.observe
        step = max(1, len(runs) // LAG_SAMPLES)
        for r in runs[::step]:
            observe(max(0.0, now_ms - r.due_ms) / 1000)
        return pushed

    async def prepare(self) -> None:
        """On election: the group exists, and the marker records which Redis we pushed to."""
        await self.stream.ensure_group()
        self._run_id = await self._server_run_id()
        await self._client.set(self._keys.redis_marker, self._run_id)

    async def data_lost(self) -> str | None:
        """Why Redis no longer holds what we pushed (restart, flush), or None when it does."""
        marker = await self._client.get(self._keys.redis_marker)
        run_id = await self._server_run_id()
        reason = None
        if marker is None:
            reason = "marker key missing"
        elif self._run_id is not None and run_id != self._run_id:
            reason = "redis run_id changed"
        elif not await self.stream.group_exists():
            reason = "stream or group missing"
        if reason is not None:
            await self.prepare()
        return reason

    async def housekeeping(self) -> int:
        """Trim acknowledged entries (never pending ones), export the stream gauges; the length."""
        await self.stream.trim_acknowledged()
        info = await self.stream.info()
        metrics.STREAM_LENGTH.set(info.length)
        metrics.STREAM_PENDING.set(info.pending)
        metrics.STREAM_LAG.set(info.lag or 0)
        return info.length

    async def _server_run_id(self) -> str:
        # The server holding the stream (in a cluster, the master of its slot).
        info = await redis_client.server_info(self._client, self._keys.stream)
        return str(info.get("run_id", ""))
