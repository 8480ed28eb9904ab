"""One leadership term: renew, listen, tick, reap, housekeep, watch, audit, retain, count the runs
due ahead and remove gone executors' stream consumers side by side, ended together.

A term ends when any of its loops ends: a refused or late renewal (LeadershipLost), a
fenced write refused (NotLeader), PostgreSQL or Redis going away (BackendUnavailable,
raised on to the session), or stop(). Every other error is a bug and propagates.

The listener pings PostgreSQL on its own connection every renew interval, within
`leader_db_timeout_ms` (its own connection: a ping queued behind a long catch-up on the pool
would measure the pool, not the link): a leader cut from PostgreSQL (even silently: packets
dropped, connections open) ends its term within that bound plus an interval, and the session
releases the lock for a node that reaches both backends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

import asyncpg
from redis.exceptions import ResponseError

from cronos import presence
from cronos.aio import wait_any
from cronos.clock import DbClock
from cronos.errors import BackendUnavailable, NotLeader
from cronos.keys import Keys
from cronos.redis_client import Redis
from cronos.settings import Settings
from cronos.store.joins import JoinStore
from cronos.store.ledger import Ledger
from cronos.store.notify import Outbox as NotifyOutbox
from cronos.store.partitions import PartitionStore
from cronos.store.queues import QueueStore
from cronos.store.rules import RuleStore
from cronos.store.runs import RunStore
from dispatcher import breaker, due_gauge, health, joins, pauses, reaper, retention
from dispatcher.auditor import Auditor
from dispatcher.consumer_reaper import ConsumerReaper
from dispatcher.election import Election, LeadershipLost
from dispatcher.housekeeping import Housekeeping
from dispatcher.listener import Listener
from dispatcher.notifier import Notifier
from dispatcher.publisher import Publisher
from dispatcher.ticker import Ticker
from dispatcher.watchdog import Watchdog

LISTEN_READY_S = 5.0


class Stopped(Exception):
    """Raised inside a term when stop() was called, to end its TaskGroup."""


async def beat(
    client: Redis, keys: Keys, settings: Settings, election: Election, wrote_at: float | None = None
) -> None:
    """This node's presence (a candidate's or the leader's), for the cluster view: a leader adds
    when it last completed a PostgreSQL round trip and last wrote ticks (unix time), so the view
    can tell a leader that cannot write from a healthy one."""
    info: dict[str, object] = {"leader": int(election.leading), "epoch": election.epoch or 0}
    if election.leading and election.db_ok_wall is not None:
        info["db_ok_at"] = f"{election.db_ok_wall:.3f}"
        info["db_timeout_s"] = f"{election.db_timeout_s:g}"
    if election.leading and wrote_at is not None:
        info["wrote_at"] = f"{wrote_at:.3f}"
    ttl_s = settings.leader_ttl_ms / 1000 * 3
    await presence.beat(client, keys, "dispatcher", settings.node_id, ttl_s, **info)


class Term:
    """Cancellation alone is not enough to end the loops on Python 3.11: asyncio.timeout can
    turn a cancellation that lands as its own deadline passes (every timer fires at once after
    a SIGSTOP) into TimeoutError, and a loop would go on. So loops also check `over` around
    every sleep (`sleep`, `checkpoint`).
    """

    def __init__(
        self,
        settings: Settings,
        client: Redis,
        pool: asyncpg.Pool,
        publisher: Publisher,
        election: Election,
        *,
        stopping: asyncio.Event,
        connected_at: float,
        clock: DbClock,
    ) -> None:
        self._settings = settings
        self._keys = Keys(settings.key_prefix)
        self._client = client
        self._pool = pool
        self._publisher = publisher
        self._election = election
        self._stopping = stopping
        self._connected_at = connected_at  # when this session reached PostgreSQL (monotonic)
        self._clock = clock  # PostgreSQL's: the ticker plans and pushes by it (the listener measures it)
        self.over = asyncio.Event()
        self.ticker = Ticker(
            Ledger(pool),
            publisher,
            election.check,
            resync_interval_s=settings.resync_interval_s,
            push_lead_ms=settings.push_lead_ms,
            catchup_per_s=settings.catchup_max_per_s,
            rules=RuleStore(pool),
            stamp_written=bool(settings.traces),
        )

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

    async def run(self) -> None:
        """Until the term ends; returns when it ended as terms do, raises BackendUnavailable or a bug."""
        settings, election = self._settings, self._election
        listener = Listener(
            settings.database_url,
            self.ticker.notify,
            ping_interval_s=election.renew_interval_s,
            ping_timeout_s=election.db_timeout_s,
            on_ping=election.db_ok,
            clock=self._clock,
        )
        housekeeping = Housekeeping(self._publisher, self.ticker, settings, QueueStore(self._pool))
        loops = {
            "renew": self._renew(),
            "listen": listener.run(),
            "stop": self._stop_watch(),
            "tick": self.ticker.run(self._clock.now, checkpoint=self.checkpoint),
            "reap": reaper.run(
                self, RunStore(self._pool), election, settings.run_lease_s, self._connected_at, self.ticker.take_soon
            ),
            "housekeep": housekeeping.run(self),
            "watchdog": Watchdog(
                Ledger(self._pool),
                RunStore(self._pool),
                self._publisher,
                election.check,
                settings.overdue_after_ms,
                self.ticker.take_soon,
            ).run(self),
            "audit": Auditor(
                self._pool,
                settings.audit_interval_s,
                settings.audit_settle_s,
                election.check,
                foreground=self.ticker.foreground,
            ).run(self),
            "health": health.run(self, self._pool, election.check, settings, self.ticker.foreground),
            "retain": retention.run(self, PartitionStore(self._pool), election, settings.runs_retention_s),
            "unpause": pauses.run(self, RuleStore(self._pool), election),
            "joins": joins.run(self, JoinStore(self._pool), election, settings.runs_retention_s),
            "notify": Notifier(NotifyOutbox(self._pool), election.check, settings).run(self),
            "due": due_gauge.run(self, self.ticker.book, self._clock.now),
        }
        # Always: a job's own `expectations.breaker` works with the cluster's default off (0).
        loops["breaker"] = breaker.run(
            self, self._pool, election, settings.breaker_default_failures, settings.health_interval_s,
            settings.breaker_defaults,
        )  # fmt: skip
        if settings.consumer_idle_remove_s > 0:
            reaper_of_consumers = ConsumerReaper(
                self._client, self._keys, self._publisher.queues, election.check, settings.consumer_idle_remove_s
            )
            loops["consumers"] = reaper_of_consumers.run(self)
        try:
            async with asyncio.TaskGroup() as group:
                for name in ("renew", "listen", "stop"):
                    self._start(group, name, loops.pop(name))
                # Listen before the first resync, so no change falls between the two.
                try:
                    async with asyncio.timeout(LISTEN_READY_S):
                        await listener.ready.wait()
                except TimeoutError:
                    raise BackendUnavailable("postgresql", f"LISTEN not ready within {LISTEN_READY_S} s") from None
                try:
                    await self._publisher.prepare()
                except ResponseError as exc:
                    # Out of memory, a wrong type on our key: this node cannot lead now. Step down
                    # and campaign again after a backoff, rather than exit.
                    raise BackendUnavailable("redis", f"cannot prepare the run stream: {exc}") from exc
                for name in list(loops):
                    try:
                        self._start(group, name, loops[name])
                    except RuntimeError:  # the group is shutting down (stopped during the start)
                        break  # `finally` closes the loops never started
                    del loops[name]
        except BaseExceptionGroup as group_exc:
            leaves = _leaves(group_exc)
            for leaf in leaves:
                if isinstance(leaf, BackendUnavailable):
                    raise leaf from None
            for leaf in leaves:
                if isinstance(leaf, LeadershipLost | NotLeader):
                    election.step_down(str(leaf))
                    return
            if all(isinstance(leaf, Stopped) for leaf in leaves):
                return
            raise
        finally:
            for work in loops.values():  # never started (the term ended during its start)
                work.close()

    def _start(self, group: asyncio.TaskGroup, name: str, work: Coroutine[Any, Any, None]) -> None:
        """Run one side loop in the term's group; whichever ends first ends the term. The loop is
        the task's own coroutine, not wrapped: a task cancelled before its first step (the group
        aborting during the start) then closes it, where a wrapper would leave it never awaited."""
        task = group.create_task(work, name=f"dispatcher:{name}")
        task.add_done_callback(self._loop_ended)

    def _loop_ended(self, _task: asyncio.Task[None]) -> None:
        self.over.set()
        self.ticker.interrupt()

    async def _stop_watch(self) -> None:
        await wait_any(self._stopping, self.over)
        if self._stopping.is_set():
            raise Stopped

    async def _renew(self) -> None:
        while True:
            await self.sleep(self._election.renew_interval_s)
            await self._election.renew()  # raises LeadershipLost
            await beat(self._client, self._keys, self._settings, self._election, self.ticker.wrote_at)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
