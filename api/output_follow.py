"""Fan-out of run output to followers (GET /api/runs/{id}/output/follow): one LISTEN connection per
API process, opened when the first reader follows, hears which runs' executors wrote
(cronos.store.run_output.listen); each follower of such a run is woken to read its new lines from
PostgreSQL. No reader talks to an executor, and many readers of one run cost one notification.
Without the connection (lost, PostgreSQL away) followers read every POLL_S instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import asyncpg
from aiohttp import web

from cronos.errors import BackendUnavailable
from cronos.store import run_output

POLL_S = 1.0  # a follower reads at least this often (no notification heard, or no connection)
RETRY_S = 5.0  # a LISTEN connection that failed is tried again after this long


class Followers:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._waiting: dict[int, set[asyncio.Event]] = {}
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        self._retry_at = 0.0

    async def wait(self, run_id: int, timeout_s: float = POLL_S) -> None:
        """Until run `run_id` wrote (as its executor notified), `timeout_s` at most."""
        await self._listening()
        event = asyncio.Event()
        self._waiting.setdefault(run_id, set()).add(event)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout_s)
        finally:
            events = self._waiting.get(run_id, set())
            events.discard(event)
            if not events:
                self._waiting.pop(run_id, None)

    def _heard(self, run_id: int | None) -> None:
        runs = self._waiting.values() if run_id is None else [self._waiting.get(run_id, set())]
        for events in runs:
            for event in events:
                event.set()

    async def _listening(self) -> None:
        if (self._conn is not None and not self._conn.is_closed()) or time.monotonic() < self._retry_at:
            return
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return
            try:
                self._conn = await run_output.listen(self._dsn, self._heard)
            except BackendUnavailable:
                self._retry_at = time.monotonic() + RETRY_S  # meanwhile followers poll

    async def close(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()


FOLLOWERS = web.AppKey("output_followers", Followers)


def setup(app: web.Application, dsn: str) -> None:
    app[FOLLOWERS] = Followers(dsn)

    async def closing(app: web.Application) -> None:
        await app[FOLLOWERS].close()

    app.on_cleanup.append(closing)
