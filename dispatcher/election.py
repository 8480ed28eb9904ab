"""Leader election: a renewed Redis lock for liveness, a PostgreSQL epoch for safety.

candidate --acquire(SET NX PX) + take epoch--> leader --renewal refused / too old--> candidate

The lease is judged by this process's monotonic clock from the moment the last
successful renewal was *sent* (Redis started the ttl no earlier than that), minus a
safety margin; past it the leader stops acting even before the renewer notices. Writes
are still fenced by the epoch, which is what makes a paused leader harmless (G5).

Leading needs both backends: the lock is renewed only while PostgreSQL answered recently
(`db_ok`, called after each round trip of the listener's ping). A leader cut from
PostgreSQL but not from Redis would otherwise keep the lock and write nothing (issue 16).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import NoReturn

from cronos import metrics
from cronos.errors import BackendUnavailable
from cronos.locks import OwnedLock
from cronos.store.epoch import EpochStore

log = logging.getLogger("dispatcher.election")


class LeadershipLost(Exception):
    """This node must stop acting as the leader; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Election:
    def __init__(
        self,
        lock: OwnedLock,
        epochs: EpochStore,
        node_id: str,
        ttl_ms: int,
        *,
        db_timeout_ms: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = lock
        self._epochs = epochs
        self.node_id = node_id
        self.ttl_s = ttl_ms / 1000
        # Stop acting this long before the lock can expire in Redis (clock drift, GC pauses).
        self.margin_s = max(0.2 * self.ttl_s, 0.05)
        self.renew_interval_s = self.ttl_s / 3
        self._clock = clock
        self._renewed_at = float("-inf")
        self.epoch: int | None = None
        # A PostgreSQL round trip must complete within db_timeout_s (the listener pings every
        # renew interval); the renewer refuses to extend a lease once the last one that did is older
        # than db_stale_s (a backstop should the pings themselves be stuck).
        self.db_timeout_s = (db_timeout_ms if db_timeout_ms is not None else ttl_ms) / 1000
        self.db_stale_s = self.db_timeout_s + 2 * self.renew_interval_s
        self._db_ok_at = float("-inf")  # monotonic: the last PostgreSQL round trip completed
        self.db_ok_wall: float | None = None  # the same instant, wall clock (for the cluster view)

    @property
    def leading(self) -> bool:
        """True while this node may act as the leader: it has an epoch and a fresh lease."""
        return self.epoch is not None and self._clock() - self._renewed_at < self.ttl_s - self.margin_s

    def check(self) -> int:
        """The epoch to fence a write with; raises LeadershipLost when the lease is too old."""
        epoch = self.epoch
        if epoch is None or not self.leading:
            self._lost("lease expired before it was renewed")
        assert epoch is not None
        return epoch

    async def campaign(self) -> int | None:
        """Try to become the leader: the lock, then a new epoch. None: someone else leads."""
        sent = self._clock()
        if not await self._lock.acquire():
            return None
        self._renewed_at = sent
        try:
            try:
                async with asyncio.timeout(self.db_timeout_s):
                    info = await self._epochs.take(self.node_id)
            except TimeoutError:
                raise BackendUnavailable("postgresql", f"no epoch within {self.db_timeout_s:g} s") from None
        except BaseException:
            await self._release_quietly()
            raise
        self.epoch = info.epoch
        self.db_ok()
        if not self.leading:  # taking the epoch took longer than the lease: start over
            await self.resign()
            return None
        metrics.LEADER.set(1)
        metrics.LEADER_EPOCH.set(info.epoch)
        metrics.LEADER_ELECTIONS.inc()
        log.info(
            "elected leader",
            extra={
                "event": "leader.elected",
                "epoch": info.epoch,
                "holder": self.node_id,
                "elected_at": info.elected_at,
            },
        )
        return info.epoch

    async def renew(self) -> None:
        """Extend the lease; raises LeadershipLost when the lock is no longer ours."""
        if not self.leading:
            self._lost("lease expired before it was renewed")
        if (age := self.db_age_s) > self.db_stale_s:
            self._lost(f"no PostgreSQL round trip for {age:.1f} s")
        sent = self._clock()
        if not await self._lock.renew():
            self._lost("lock taken by another node")
        self._renewed_at = sent

    def db_ok(self) -> None:
        """A PostgreSQL round trip just completed."""
        self._db_ok_at = self._clock()
        self.db_ok_wall = time.time()
        metrics.LEADER_DB_OK.set(self.db_ok_wall)

    @property
    def db_age_s(self) -> float:
        """Seconds since the last PostgreSQL round trip completed (inf: none yet)."""
        return self._clock() - self._db_ok_at

    def _lost(self, reason: str) -> NoReturn:
        self.step_down(reason)  # at once: the term's tasks may take a moment to wind down
        raise LeadershipLost(reason)

    def step_down(self, reason: str) -> None:
        """Stop acting at once (sync: no I/O). Idempotent."""
        if self.epoch is None:
            return
        level = logging.INFO if reason in ("stopped", "resigned") else logging.WARNING
        log.log(level, "stepped down", extra={"event": "leader.lost", "epoch": self.epoch, "reason": reason})
        self.epoch = None
        self._renewed_at = float("-inf")
        self._db_ok_at = float("-inf")
        metrics.LEADER.set(0)
        metrics.LEADER_EPOCH.set(0)

    async def resign(self, reason: str = "resigned") -> None:
        """Step down and free the lock (compare-and-delete) so another node takes over at once."""
        self.step_down(reason)
        await self._release_quietly()

    async def _release_quietly(self) -> None:
        try:
            await self._lock.release()
        except Exception as exc:  # noqa: BLE001 - Redis gone: the lock expires by itself
            log.info("could not release the leader lock", extra={"event": "leader.release_failed", "error": str(exc)})
