"""Per-host limits of concurrent http requests on this executor (docs/host-limits.md).

A herd of http jobs due at :00 would otherwise send one target as many requests at once as the
executor has execution slots (2,000). Each request first takes a place at its host, keyed by the
scheme, host and port it goes to (`cronos.host_limits.origin_key`: each redirect hop to another
origin takes a place there in turn). A request goes at once while fewer than its limit are in
flight to that host and nobody waits before it; otherwise it waits in the host's line, first come
first served (a job with a lower limit waits at the head until the host is under it: no request
overtakes another).

A run waiting in a line lends its execution slot back to the gate (`executor.gate`) and takes one
again, ahead of new tokens, once its turn comes: one slow host never holds the slots the other
hosts' runs need. The run's timeout covers the wait: a run still waiting when its timeout is
about to end fails with "waited N s for a connection slot to host X"; a cancel (executor.cancels)
ends the wait at once. The limits are per executor process, not cluster-wide (N executors can
send N times the limit; a concurrency group bounds a set of jobs across the cluster).

Metrics are aggregates (a host is no label: targets are unbounded); the host is named in the
run's error and in the `http.host_wait_long` log line of a run still waiting after LONG_WAIT_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from cronos import metrics
from cronos.host_limits import DEFAULT_HOST_LIMIT, HostLimit, effective_limit, host_limit, normal_host, origin_key
from cronos.tasks import Cancellation

log = logging.getLogger("cronos.executor")

LONG_WAIT_S = 5.0  # a run still waiting this long is logged (once)
NO_LIMIT = 1 << 62


class Slots(Protocol):
    """The executor's execution slots (executor.gate.Gate)."""

    def lend(self) -> None: ...

    async def reclaim(self) -> None: ...

    def retake(self) -> None: ...


class HostWaitEnded(Exception):
    """A request that never got its place: the run's time ran out, or it was cancelled."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(eq=False, slots=True)
class _Waiter:
    limit: int
    future: asyncio.Future[None]


@dataclass(eq=False, slots=True)
class _Host:
    limit: int  # the host's own (0: none), before any job lowers it
    in_flight: int = 0
    waiting: int = 0  # live waiters (the line may still hold given-up ones, dropped at its head)
    line: deque[_Waiter] = field(default_factory=deque)


class HostLimiter:
    def __init__(
        self, entries: tuple[HostLimit, ...] = (), default: int = DEFAULT_HOST_LIMIT, slots: Slots | None = None
    ) -> None:
        self._entries = entries
        self._default = default
        self.slots = slots  # set by the executor (its gate); None: waiting runs lend nothing
        self._hosts: dict[str, _Host] = {}  # only hosts with a request in flight or waiting

    @property
    def tracked(self) -> int:
        """Hosts kept in memory: only those with a request in flight or waiting."""
        return len(self._hosts)

    def in_flight(self, key: str) -> int:
        host = self._hosts.get(key)
        return 0 if host is None else host.in_flight

    def waiting(self, key: str) -> int:
        host = self._hosts.get(key)
        return 0 if host is None else host.waiting

    @contextlib.asynccontextmanager
    async def place(
        self,
        scheme: str,
        host_name: str,
        port: int,
        job_limit: int | None,
        *,
        give_up_at: float,
        cancellation: Cancellation,
    ) -> AsyncIterator[float]:
        """Hold a place for one request to scheme://host:port; yields the seconds waited for it.
        Raises HostWaitEnded when the loop's clock reaches `give_up_at` first, or the run is
        cancelled, while it waits."""
        name = normal_host(host_name)
        key = origin_key(scheme, name, port)
        host = self._hosts.get(key)
        if host is None:
            host = self._hosts[key] = _Host(host_limit(self._entries, name, port, self._default))
        limit = effective_limit(host.limit, job_limit) or NO_LIMIT
        waited = 0.0
        if host.in_flight < limit and not host.waiting:
            host.in_flight += 1
        else:
            waited = await self._wait(key, host, limit, give_up_at, cancellation)
        try:
            yield waited
        finally:
            host.in_flight -= 1
            self._admit(key, host)

    async def _wait(self, key: str, host: _Host, limit: int, give_up_at: float, cancellation: Cancellation) -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiter = _Waiter(limit, loop.create_future())
        host.line.append(waiter)
        host.waiting += 1
        metrics.HTTP_HOST_REQUESTS_WAITING.inc()
        if host.waiting == 1:
            metrics.HTTP_HOSTS_WAITING.inc()
        if self.slots is not None:
            self.slots.lend()
        try:
            await self._until_granted(key, host, waiter, started, give_up_at, cancellation)
        except BaseException as exc:
            ended = isinstance(exc, HostWaitEnded) and not cancellation.is_set()
            self._count(started, "timed_out" if ended else "cancelled")
            if waiter.future.done() and not waiter.future.cancelled():  # its turn came meanwhile: pass it on
                host.in_flight -= 1
            else:
                waiter.future.cancel()
                self._left_line(host)
            self._admit(key, host)
            if self.slots is not None:
                self.slots.retake()  # the run ends: it gives the slot back at once
            raise
        waited = self._count(started, "granted")
        if self.slots is not None:
            try:
                await self.slots.reclaim()  # it holds a slot after this, whatever happens
            except BaseException:
                host.in_flight -= 1
                self._admit(key, host)
                raise
        return waited

    @staticmethod
    def _count(started: float, outcome: str) -> float:
        waited = asyncio.get_running_loop().time() - started
        metrics.HTTP_HOST_WAITS.labels(outcome=outcome).inc()
        metrics.HTTP_HOST_WAIT.observe(waited)
        return waited

    async def _until_granted(
        self,
        key: str,
        host: _Host,
        waiter: _Waiter,
        started: float,
        give_up_at: float,
        cancellation: Cancellation,
    ) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.ensure_future(cancellation.event.wait())
        told = False
        try:
            while True:
                now = loop.time()
                if now >= give_up_at:
                    raise HostWaitEnded(
                        f"waited {now - started:.1f}s for a connection slot to host {key}: {host.in_flight} requests"
                        f" in flight there (limit {_shown(waiter.limit)}), {host.waiting - 1} more waiting; raise"
                        " its limit (CRONOS_HTTP_HOST_LIMITS) or the job's timeout_s"
                    )
                wake = give_up_at if told else min(give_up_at, started + LONG_WAIT_S)
                await asyncio.wait((waiter.future, stop), timeout=wake - now, return_when=asyncio.FIRST_COMPLETED)
                if waiter.future.done():
                    return
                if stop.done():
                    raise HostWaitEnded(f"cancelled while waiting for a connection slot to host {key}")
                if not told and loop.time() - started >= LONG_WAIT_S:
                    told = True
                    log.warning(
                        "run waits for a connection slot to host %s", key,
                        extra={
                            "event": "http.host_wait_long", "host": key, "waited_s": round(loop.time() - started, 3),
                            "limit": _shown(waiter.limit), "in_flight": host.in_flight, "waiting": host.waiting,
                        },
                    )  # fmt: skip
        finally:
            stop.cancel()

    def _left_line(self, host: _Host) -> None:
        host.waiting -= 1
        metrics.HTTP_HOST_REQUESTS_WAITING.dec()
        if host.waiting == 0:
            metrics.HTTP_HOSTS_WAITING.dec()

    def _admit(self, key: str, host: _Host) -> None:
        """Hand places out from the head of the host's line while it is under each one's limit."""
        line = host.line
        while line:
            head = line[0]
            if head.future.done():  # gave up: already counted out
                line.popleft()
                continue
            if host.in_flight >= head.limit:
                break
            line.popleft()
            host.in_flight += 1
            self._left_line(host)
            head.future.set_result(None)
        if not host.in_flight and not line and self._hosts.get(key) is host:
            del self._hosts[key]


def _shown(limit: int) -> int | str:
    return "none" if limit == NO_LIMIT else limit
