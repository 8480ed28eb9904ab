"""The leader's Redis housekeeping, beside the publisher: notice Redis data loss (then re-push
the queued runs), trim acknowledged stream entries, drop the queues no job names once their
stream is empty, warn while the stream is over its bound.

Housekeeping never takes the leader down: a reply it did not expect, or Redis not answering,
is logged and the pass is retried after a short backoff. Whether this node may still lead is
the renewer's to decide (a Redis that stays away fails the renewal and ends the term).
"""

from __future__ import annotations

import logging
import time

from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable
from cronos.settings import Settings
from cronos.store.queues import QueueStore
from dispatcher.lifetime import Lifetime
from dispatcher.publisher import Publisher
from dispatcher.ticker import Ticker

log = logging.getLogger("dispatcher.housekeeping")

TRIM_INTERVAL_S = 5.0
LOSS_CHECK_S = 0.5
RETRY_BASE_S = 0.2  # a failed pass is tried again this soon, backing off to the interval


class Housekeeping:
    def __init__(self, publisher: Publisher, ticker: Ticker, settings: Settings, queues: QueueStore) -> None:
        self._publisher = publisher
        self._ticker = ticker
        self._queues = queues
        self._maxlen = settings.stream_maxlen
        # Data loss is checked every LOSS_CHECK_S (a GET and an INFO): the tokens Redis lost are
        # pushed again within that of Redis answering, not at the next renewal or trim.
        self.interval_s = min(LOSS_CHECK_S, settings.leader_ttl_ms / 1000)
        self._trimmed_at = time.monotonic()
        self._over_bound = False
        self._failing = False

    async def run(self, term: Lifetime) -> None:
        backoff = Backoff(base_s=RETRY_BASE_S, cap_s=self.interval_s)
        delay = self.interval_s
        while True:
            await term.sleep(delay)
            try:
                await self.once()
            except Exception as exc:  # nothing here may end the term: log, retry soon
                delay = backoff.next_delay()
                # The traceback once (not for a backend away: that is no bug), then one line per failure.
                log.warning(
                    "housekeeping failed",
                    exc_info=not self._failing and not isinstance(exc, BackendUnavailable),
                    extra={
                        "event": "housekeeping.failed",
                        "error": f"{type(exc).__name__}: {exc}",
                        "retry_in_s": round(delay, 2),
                    },
                )
                self._failing = True
            else:
                self._failing = False
                backoff.reset()
                delay = self.interval_s

    async def once(self) -> None:
        reason = await self._publisher.data_lost()
        if reason is not None:
            log.warning(
                "redis lost its data; re-pushing queued runs", extra={"event": "redis.data_lost", "reason": reason}
            )
            self._ticker.request_repush()
        if time.monotonic() - self._trimmed_at >= TRIM_INTERVAL_S:
            self._trimmed_at = time.monotonic()
            await self.tidy()

    async def tidy(self) -> None:
        """One pass over the queues: trim, drop those no job names whose stream is empty, export
        the gauges, say when the longest stream crosses its bound."""
        length = await self._publisher.housekeeping(await self._queues.named())
        over = length > self._maxlen
        if over != self._over_bound:  # acknowledged entries are trimmed; unread ones never are
            self._over_bound = over
            log.log(
                logging.WARNING if over else logging.INFO,
                "run stream over its bound: executors are behind" if over else "run stream back within bound",
                extra={"event": "stream.over_bound" if over else "stream.within_bound", "length": length},
            )
