"""The dispatcher role: a leader candidate that, while it leads, turns ticks into runs.

    session (connected) ── candidate ──win──▶ term (dispatcher.term: renew, listen, tick, reap, housekeep)
        ▲   backend lost: backoff             ◀──lost / NotLeader / stop──┘

A session connects to Redis and PostgreSQL and campaigns; each won election runs one
term. When a term ends the node steps down (releasing the lock when it can) and
campaigns again; when a backend is down (BackendUnavailable, the one error class the
stores and the Redis client raise for it) the session ends and a new one starts after
a capped backoff. One log line per state change, no traceback floods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from types import TracebackType
from typing import Any, Self

from cronos import presence, redis_client
from cronos.backoff import RECONNECT_CAP_S, Backoff
from cronos.clock import DbClock
from cronos.errors import BackendUnavailable
from cronos.keys import Keys
from cronos.locks import OwnedLock
from cronos.scripts import Scripts
from cronos.settings import Settings
from cronos.store.db import close, connect, sync_clock
from cronos.store.epoch import EpochStore
from cronos.store.identity import database_id
from dispatcher.election import Election
from dispatcher.publisher import Publisher
from dispatcher.term import Term, beat
from dispatcher.ticker import Ticker

log = logging.getLogger("dispatcher.service")


class Dispatcher:
    name = "dispatcher"

    def __init__(self, settings: Settings, *, reconnect: Backoff | None = None) -> None:
        self.settings = settings
        # A session is tried again at least every RECONNECT_CAP_S while a backend is away: after
        # a Redis or PostgreSQL outage the cluster is leaderless for at most that (then elects and
        # re-pushes), not for a long backoff (issue 13). Tests pass a faster one.
        self._reconnect = reconnect or Backoff(base_s=0.1, cap_s=RECONNECT_CAP_S)
        self.keys = Keys(settings.key_prefix)
        self._stopping = asyncio.Event()
        self._state = "starting"
        self.election: Election | None = None
        self.ticker: Ticker | None = None  # the current (or last) term's
        self.clock = DbClock()  # PostgreSQL's clock, by this node's plus a measured offset

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()

    def _transition(self, state: str, level: int = logging.INFO, **fields: Any) -> None:
        """Log a state change once (not once per retry)."""
        if state == self._state:
            return
        self._state = state
        log.log(level, f"dispatcher {state}", extra={"event": f"dispatcher.{state.replace(' ', '_')}", **fields})

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()

    async def _standby(self, client: Any, seconds: float) -> None:
        """Wait to campaign again: `seconds`, or less when the leader hands over (it pushes to
        `leader_released` as it gives up its lock), or a stop."""
        released = asyncio.ensure_future(client.blpop([self.keys.leader_released], timeout=seconds))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({released, stopping}, timeout=seconds + 0.5, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (released, stopping):
                waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await released
        if released.done() and not released.cancelled() and released.exception() is None and released.result():
            log.info("the leader handed over", extra={"event": "dispatcher.handover_seen"})

    async def _hand_over(self, client: Any, election: Election, term: Term) -> None:
        """A term ended: a stopping leader first pushes the ticks it wrote but still holds (each
        token carries its due time), then frees the lock and wakes a standby."""
        stopping = self._stopping.is_set()
        reason = "stopped" if stopping else "term ended"
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                if stopping and election.leading:
                    pushed = await term.ticker.outbox.flush(election.check())
                    log.info("held ticks pushed", extra={"event": "leader.flushed", "count": pushed})
                await election.resign(reason)
                async with client.pipeline(transaction=False) as pipe:
                    pipe.lpush(self.keys.leader_released, self.settings.node_id)
                    pipe.pexpire(self.keys.leader_released, self.settings.leader_ttl_ms)
                    await pipe.execute()
        election.step_down(reason)

    async def run(self) -> None:
        backoff = self._reconnect
        while not self._stopping.is_set():
            try:
                await self._session(backoff)
            except BackendUnavailable as exc:
                delay = backoff.next_delay()
                self._transition(
                    f"{exc.backend} unavailable", logging.WARNING, error=str(exc), retry_in_s=round(delay, 2)
                )
                await self._pause(delay)
        self._transition("stopped")

    async def _session(self, backoff: Backoff) -> None:
        ttl_ms = self.settings.leader_ttl_ms
        async with contextlib.AsyncExitStack() as stack:
            client = redis_client.connect(
                self.settings.redis_url, socket_timeout=max(ttl_ms / 1000 / 2, 0.5), socket_connect_timeout=2.0
            )
            stack.push_async_callback(client.aclose)
            await client.ping()
            # A transaction left idle (a paused leader) is ended by PostgreSQL, so it cannot
            # hold the epoch row and delay the next election.
            db_timeout_s = self.settings.leader_db_timeout_ms / 1000
            pool = await connect(
                self.settings.database_url,
                min_size=0,  # no background "restore the floor" reconnects (and tracebacks) while PostgreSQL is down
                # One connection at a time per loop of a term (ticks, outbox, reaper, watchdog, auditor,
                # health, notifier, timed pauses, group sweep): on a slow link each holds its
                # connection longer, and the tick write must not queue behind the side loops.
                max_size=12,
                timeout=max(db_timeout_s, 1.0),
                server_settings={
                    "idle_in_transaction_session_timeout": str(ttl_ms),
                    "application_name": "cronos-dispatcher",
                },
            )
            stack.push_async_callback(close, pool)
            epochs = EpochStore(pool)
            # min_size=0 connects lazily: check PostgreSQL is there (and measure its clock)
            await sync_clock(pool, self.clock, max(db_timeout_s, 1.0))
            connected_at = time.monotonic()
            lock = OwnedLock(client, Scripts(client), self.keys.leader, self.settings.node_id, ttl_ms)
            election = self.election = Election(
                lock, epochs, self.settings.node_id, ttl_ms, db_timeout_ms=self.settings.leader_db_timeout_ms
            )
            cluster_id = await database_id(pool)  # written again to Redis after a data loss
            publisher = Publisher(client, self.keys, self.clock.time, cluster_id=cluster_id)
            self._transition("candidate", node_id=self.settings.node_id)
            while not self._stopping.is_set():
                epoch = await election.campaign()
                await beat(client, self.keys, self.settings, election)
                if epoch is None:
                    await self._standby(client, election.renew_interval_s)
                    continue
                backoff.reset()
                self._transition("leading", epoch=epoch)
                term = Term(
                    self.settings,
                    client,
                    pool,
                    publisher,
                    election,
                    stopping=self._stopping,
                    connected_at=connected_at,
                    clock=self.clock,
                )
                self.ticker = term.ticker
                try:
                    await term.run()
                finally:
                    await self._hand_over(client, election, term)
                self._transition("candidate")
            await self._leave(client)

    async def _leave(self, client: Any) -> None:
        """Stopped: remove this node's presence, so the cluster view drops it at once (not when its
        ttl runs out). Bounded like the handover; a Redis that does not answer leaves it to the ttl."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                await presence.leave(client, self.keys, "dispatcher", self.settings.node_id)
