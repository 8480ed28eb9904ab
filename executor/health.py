"""Which backends failed, and waiting until they answer again.

A step that meets BackendUnavailable reports it here; the consumer stops reading while
anything is reported, and the token that failed waits in `wait_up` to be tried again the
moment its backend answers (not after XAUTOCLAIM finds it idle). One probe loop per backend
at a time, however many tokens and the consumer wait on it: a PING with a short capped
backoff, so recovery is noticed within RECONNECT_CAP_S of the backend answering.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial

from cronos import metrics
from cronos.aio import wait_any
from cronos.backoff import RECONNECT_CAP_S, Backoff
from cronos.errors import BackendUnavailable

log = logging.getLogger("cronos.executor.health")

Probe = Callable[[], Awaitable[object]]
PROBE_BASE_S = 0.05
probe_backoff = partial(Backoff, base_s=PROBE_BASE_S, cap_s=RECONNECT_CAP_S)


class BackendHealth:
    def __init__(self, probes: Mapping[str, Probe], backoff: Callable[[], Backoff] = probe_backoff) -> None:
        self._probes = probes
        self._backoff = backoff  # one per outage (tests pass a faster one)
        self._failed: set[str] = set()
        self._probing = {backend: asyncio.Lock() for backend in probes}
        self._closed = asyncio.Event()  # the drain gave up: nothing waits for a backend any more

    def report(self, exc: BackendUnavailable) -> None:
        self._failed.add(exc.backend)

    @property
    def troubled(self) -> bool:
        return bool(self._failed)

    def close(self) -> None:
        """Every waiter returns False now, and later ones at once (the executor is stopping)."""
        self._closed.set()

    async def recover(self, stopping: asyncio.Event) -> bool:
        """Until every reported backend answers its probe (True), or `stopping` is set (False)."""
        for backend in sorted(self._failed):
            if not await self.wait_up(backend, stopping):
                return False
        return True

    async def wait_up(self, backend: str, stopping: asyncio.Event | None = None) -> bool:
        """Until `backend` answers (True), or `stopping` is set or the health closed (False)."""
        async with self._probing[backend]:
            if backend not in self._failed:  # another waiter's probe saw it answer meanwhile
                return not self._closed.is_set()
            if not await self._until_up(backend, stopping):
                return False
            self._failed.discard(backend)
            return True

    async def _until_up(self, backend: str, stopping: asyncio.Event | None) -> bool:
        ends = [self._closed] if stopping is None else [self._closed, stopping]
        backoff = self._backoff()
        logged = False
        while True:
            if any(event.is_set() for event in ends):
                return False
            try:
                await self._probes[backend]()
                break
            except BackendUnavailable as exc:
                delay = backoff.next_delay()
                if not logged:  # one line per outage, not one per probe
                    log.warning(
                        "%s unavailable, probing every %.1f s at most: %s",
                        backend,
                        RECONNECT_CAP_S,
                        exc,
                        extra={"event": "backend.waiting", "backend": backend},
                    )
                    logged = True
                metrics.BACKEND_UP.labels(backend=backend).set(0)
                try:
                    async with asyncio.timeout(delay):
                        await wait_any(*ends)
                except TimeoutError:
                    pass
        metrics.BACKEND_UP.labels(backend=backend).set(1)
        log.info("%s is back", backend, extra={"event": "backend.back", "backend": backend})
        return True
