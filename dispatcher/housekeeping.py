"""The leader's Redis housekeeping, beside the publisher: notice Redis data loss (then re-push
the queued runs), trim acknowledged stream entries, warn while the stream is over its bound.

Housekeeping never takes the leader down on a reply it did not expect: it logs and goes on.
Redis being unreachable (BackendUnavailable) still ends the term, as everywhere.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from cronos.errors import BackendUnavailable
from cronos.settings import Settings
from dispatcher.publisher import Publisher
from dispatcher.ticker import Ticker

if TYPE_CHECKING:
    from dispatcher.term import Term

log = logging.getLogger("dispatcher.housekeeping")

TRIM_INTERVAL_S = 5.0


class Housekeeping:
    def __init__(self, publisher: Publisher, ticker: Ticker, settings: Settings) -> None:
        self._publisher = publisher
        self._ticker = ticker
        self._maxlen = settings.stream_maxlen
        # Data loss is checked at least once per leader ttl (the re-push should not wait longer).
        self.interval_s = min(TRIM_INTERVAL_S, settings.leader_ttl_ms / 1000)
        self._trimmed_at = time.monotonic()
        self._over_bound = False
        self._failing = False

    async def run(self, term: Term) -> None:
        while True:
            await term.sleep(self.interval_s)
            try:
                await self.once()
            except BackendUnavailable:
                raise
            except Exception as exc:  # an unexpected reply must not end the term
                # The traceback once, then one line per failure.
                log.warning(
                    "housekeeping failed",
                    exc_info=not self._failing,
                    extra={"event": "housekeeping.failed", "error": f"{type(exc).__name__}: {exc}"},
                )
                self._failing = True
            else:
                self._failing = False

    async def once(self) -> None:
        reason = await self._publisher.data_lost()
        if reason is not None:
            log.warning(
                "redis lost its data; re-pushing queued runs", extra={"event": "redis.data_lost", "reason": reason}
            )
            self._ticker.request_repush()
        if time.monotonic() - self._trimmed_at >= TRIM_INTERVAL_S:
            self._trimmed_at = time.monotonic()
            length = await self._publisher.housekeeping()
            over = length > self._maxlen
            if over != self._over_bound:  # acknowledged entries are trimmed; unread ones never are
                self._over_bound = over
                log.log(
                    logging.WARNING if over else logging.INFO,
                    "run stream over its bound: executors are behind" if over else "run stream back within bound",
                    extra={"event": "stream.over_bound" if over else "stream.within_bound", "length": length},
                )
