"""The dispatcher role: a leader candidate that, while it leads, turns ticks into runs.

    session (connected) ── candidate ──win──▶ term (TaskGroup: renew, listen, tick, reap, housekeep)
        ▲   backend lost: backoff             ◀──lost / NotLeader / stop──┘

A term ends when any of its loops ends: a refused or late renewal, a fenced write
refused (NotLeader), PostgreSQL or Redis going away, or stop(). The node then steps
down (releasing the lock when it can) and campaigns again, after a capped backoff
when a backend is down. One log line per state change, no traceback floods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Self

import asyncpg
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cronos import presence
from cronos.aio import wait_any
from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable, NotLeader
from cronos.keys import Keys
from cronos.locks import OwnedLock
from cronos.scripts import Scripts
from cronos.settings import Settings
from cronos.store.db import CONNECTION_ERRORS, connect
from cronos.store.epoch import EpochStore
from cronos.store.ledger import Ledger
from dispatcher.election import Election, LeadershipLost
from dispatcher.listener import Listener
from dispatcher.publisher import Publisher
from dispatcher.ticker import Ticker

log = logging.getLogger("dispatcher.service")

HOUSEKEEPING_S = 5.0
REAP_BATCH = 1000
REDIS_ERRORS: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError)


class _Stopped(Exception):
    """Raised inside a term when stop() was called, to end its TaskGroup."""


# SQLSTATEs that mean "PostgreSQL is in trouble, try again": connection (08), rollback such as
# a deadlock (40), resources (53), operator intervention such as a restart (57), and an
# idle-in-transaction timeout (25P03: this leader was paused mid-transaction).
_RETRYABLE_SQLSTATE = ("08", "40", "53", "57", "25P03")


def backend_of(exc: BaseException) -> str | None:
    """'postgresql' / 'redis' when `exc` means that backend is unreachable or failing, else None."""
    if isinstance(exc, BackendUnavailable):
        return exc.backend
    if isinstance(exc, REDIS_ERRORS):
        return "redis"
    if isinstance(exc, CONNECTION_ERRORS):
        return "postgresql"
    if isinstance(exc, asyncpg.PostgresError) and str(exc.sqlstate or "").startswith(_RETRYABLE_SQLSTATE):
        return "postgresql"
    return None


class _Term:
    """One leadership term: its loops end together, the first to end ends them all.

    Cancellation alone is not enough on Python 3.11: asyncio.timeout can turn a
    cancellation that lands as its own deadline passes (every timer fires at once after
    a SIGSTOP) into TimeoutError, which the Redis client then retries, and the loop
    would go on. So loops also check `over` around every sleep.
    """

    def __init__(self) -> None:
        self.over = asyncio.Event()

    def checkpoint(self) -> None:
        task = asyncio.current_task()
        if self.over.is_set() or (task is not None and task.cancelling()):
            raise asyncio.CancelledError

    async def sleep(self, seconds: float) -> None:
        self.checkpoint()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.over.wait()
        self.checkpoint()

    async def guard(self, work: Coroutine[Any, Any, None], on_end: Callable[[], None]) -> None:
        try:
            await work
        finally:
            self.over.set()
            on_end()


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


class Dispatcher:
    name = "dispatcher"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.keys = Keys(settings.key_prefix)
        self._stopping = asyncio.Event()
        self._state = "starting"
        self.election: Election | None = None
        self.ticker: Ticker | None = None

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

    async def run(self) -> None:
        # A candidate retries at least once a lease ttl: a Redis or PostgreSQL outage should not
        # keep the cluster leaderless for longer than the backoff after the backend is back.
        backoff = Backoff(base_s=0.2, cap_s=max(1.0, self.settings.leader_ttl_ms / 1000))
        while not self._stopping.is_set():
            try:
                await self._session(backoff)
            except Exception as exc:
                backend = backend_of(exc)
                if backend is None:
                    raise
                delay = backoff.next_delay()
                self._transition(f"{backend} unavailable", logging.WARNING, error=str(exc), retry_in_s=round(delay, 2))
                await self._pause(delay)
        self._transition("stopped")

    async def _session(self, backoff: Backoff) -> None:
        ttl_ms = self.settings.leader_ttl_ms
        async with contextlib.AsyncExitStack() as stack:
            client = aioredis.from_url(
                self.settings.redis_url, socket_timeout=max(ttl_ms / 1000 / 2, 0.5), socket_connect_timeout=2.0
            )
            stack.push_async_callback(client.aclose)
            await client.ping()
            # A transaction left idle (a paused leader) is ended by PostgreSQL, so it cannot
            # hold the epoch row and delay the next election.
            pool = await connect(
                self.settings.database_url,
                min_size=0,  # no background "restore the floor" reconnects (and tracebacks) while PostgreSQL is down
                max_size=4,
                server_settings={
                    "idle_in_transaction_session_timeout": str(ttl_ms),
                    "application_name": "cronos-dispatcher",
                },
            )
            stack.push_async_callback(pool.close)
            epochs = EpochStore(pool)
            await epochs.current()  # min_size=0 connects lazily: check PostgreSQL is there
            connected_at = time.monotonic()
            scripts = Scripts(client)
            lock = OwnedLock(client, scripts, self.keys.leader, self.settings.node_id, ttl_ms)
            election = self.election = Election(lock, epochs, self.settings.node_id, ttl_ms)
            publisher = Publisher(client, self.keys)
            ledger = Ledger(pool)
            self._transition("candidate", node_id=self.settings.node_id)
            while not self._stopping.is_set():
                epoch = await election.campaign()
                await self._beat(client, election)
                if epoch is None:
                    await self._pause(election.renew_interval_s)
                    continue
                backoff.reset()
                self._transition("leading", epoch=epoch)
                try:
                    await self._term(client, pool, ledger, publisher, election, connected_at)
                finally:
                    reason = "stopped" if self._stopping.is_set() else "term ended"
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(1.0):
                            await election.resign(reason)
                    election.step_down(reason)
                self._transition("candidate")

    async def _term(
        self, client: Any, pool: Any, ledger: Ledger, publisher: Publisher, election: Election, connected_at: float
    ) -> None:
        ticker = self.ticker = Ticker(
            ledger,
            publisher,
            election.check,
            resync_interval_s=self.settings.resync_interval_s,
            push_lead_ms=self.settings.push_lead_ms,
        )
        listener = Listener(self.settings.database_url, ticker.notify)
        term = _Term()
        loops = {
            "renew": self._renewer(term, client, election),
            "listen": listener.run(),
            "stop": self._stop_watch(term),
            "tick": ticker.run(checkpoint=term.checkpoint),
            "reap": self._reaper(term, pool, election, connected_at),
            "housekeep": self._housekeeping(term, publisher, ticker),
        }
        try:
            async with asyncio.TaskGroup() as group:
                for name in ("renew", "listen", "stop"):
                    group.create_task(term.guard(loops.pop(name), ticker.interrupt), name=f"dispatcher:{name}")
                # Listen before the first resync, so no change falls between the two.
                async with asyncio.timeout(5.0):
                    await listener.ready.wait()
                await publisher.prepare()
                for name, work in loops.items():
                    group.create_task(term.guard(work, ticker.interrupt), name=f"dispatcher:{name}")
                loops.clear()
        except BaseExceptionGroup as group_exc:
            leaves = _leaves(group_exc)
            for leaf in leaves:
                if backend_of(leaf) is not None:
                    raise leaf from None
            for leaf in leaves:
                if isinstance(leaf, LeadershipLost | NotLeader):
                    election.step_down(str(leaf))
                    return
            if all(isinstance(leaf, _Stopped) for leaf in leaves):
                return
            raise
        finally:
            for work in loops.values():  # never started (the term ended during its start)
                work.close()

    async def _stop_watch(self, term: _Term) -> None:
        await wait_any(self._stopping, term.over)
        if self._stopping.is_set():
            raise _Stopped

    async def _beat(self, client: Any, election: Election) -> None:
        ttl_s = self.settings.leader_ttl_ms / 1000 * 3
        await presence.beat(
            client,
            self.keys,
            "dispatcher",
            self.settings.node_id,
            ttl_s,
            leader=int(election.leading),
            epoch=election.epoch or 0,
        )

    async def _renewer(self, term: _Term, client: Any, election: Election) -> None:
        while True:
            await term.sleep(election.renew_interval_s)
            await election.renew()  # raises LeadershipLost
            await self._beat(client, election)

    async def _reaper(self, term: _Term, pool: Any, election: Election, connected_at: float) -> None:
        try:
            from cronos.store.runs import RunStore
        except ImportError:  # the executor's store is missing: nothing to reap with
            log.warning("run reaper unavailable", extra={"event": "reaper.unavailable"})
            await term.over.wait()
            return
        lease_s = self.settings.run_lease_s
        # Live executors get one full lease after a reconnect to heartbeat before we judge them.
        await term.sleep(max(0.0, connected_at + lease_s - time.monotonic()))
        store = RunStore(pool)
        while True:
            reaped = await store.reap(election.check(), limit=REAP_BATCH)
            while reaped.lost + reaped.expired >= REAP_BATCH:  # a backlog: keep going, yielding
                term.checkpoint()
                reaped = await store.reap(election.check(), limit=REAP_BATCH)
            await term.sleep(lease_s / 2)

    async def _housekeeping(self, term: _Term, publisher: Publisher, ticker: Ticker) -> None:
        interval = min(HOUSEKEEPING_S, self.settings.leader_ttl_ms / 1000)
        last_trim, over_bound = time.monotonic(), False
        while True:
            await term.sleep(interval)
            reason = await publisher.data_lost()
            if reason is not None:
                log.warning(
                    "redis lost its data; re-pushing queued runs", extra={"event": "redis.data_lost", "reason": reason}
                )
                ticker.request_repush()
            if time.monotonic() - last_trim >= HOUSEKEEPING_S:
                last_trim = time.monotonic()
                length = await publisher.housekeeping()
                over = length > self.settings.stream_maxlen
                if over != over_bound:  # acknowledged entries are trimmed; unread ones never are
                    over_bound = over
                    log.log(
                        logging.WARNING if over else logging.INFO,
                        "run stream over its bound: executors are behind" if over else "run stream back within bound",
                        extra={"event": "stream.over_bound" if over else "stream.within_bound", "length": length},
                    )
