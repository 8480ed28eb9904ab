"""Which backends failed, and waiting until they answer again.

A step that meets BackendUnavailable reports it here and leaves its token pending; the
consumer stops reading while anything is reported, and `recover` probes each reported
backend with capped backoff until it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

from cronos import metrics
from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable

log = logging.getLogger("cronos.executor.health")

Probe = Callable[[], Awaitable[object]]


class BackendHealth:
    def __init__(self, probes: Mapping[str, Probe]) -> None:
        self._probes = probes
        self._failed: set[str] = set()

    def report(self, exc: BackendUnavailable) -> None:
        self._failed.add(exc.backend)

    @property
    def troubled(self) -> bool:
        return bool(self._failed)

    async def recover(self, stopping: asyncio.Event) -> bool:
        """Until every reported backend answers its probe (True), or `stopping` is set (False)."""
        while self._failed:
            backend = self._failed.pop()
            if not await self._until_up(backend, stopping):
                self._failed.add(backend)
                return False
        return True

    async def _until_up(self, backend: str, stopping: asyncio.Event) -> bool:
        backoff = Backoff(base_s=0.2, cap_s=5.0)
        while True:
            try:
                await self._probes[backend]()
                break
            except BackendUnavailable as exc:
                delay = backoff.next_delay()
                log.warning(
                    "%s still unavailable, retrying in %.1f s: %s",
                    backend,
                    delay,
                    exc,
                    extra={"event": "backend.waiting", "backend": backend},
                )
                metrics.BACKEND_UP.labels(backend=backend).set(0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), timeout=delay)
                if stopping.is_set():
                    return False
        metrics.BACKEND_UP.labels(backend=backend).set(1)
        log.info("%s is back", backend, extra={"event": "backend.back", "backend": backend})
        return True
