"""One clock for due times: PostgreSQL's.

A node's wall clock may be seconds off. PostgreSQL already stamps every claim, finish and
ledger write, so due times are judged by its clock too: a node measures the offset of its own
wall clock from PostgreSQL's on each ping (the reading is taken mid-round-trip, so the error is
at most half the round trip; of the last WINDOW samples the one with the shortest round trip
wins) and reads the time as its clock plus that offset. The leader plans, writes ahead and
pushes by it; executors hold a token and claim it by it. Monotonic clocks (timeouts, leases,
sleeps) are not affected by a wrong wall clock and stay local.

Pure: the caller measures and hands in the three readings.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

WINDOW = 8
SKEW_WARN_S = 0.5  # an offset beyond this is worth a warning: the node's clock is not synchronized


class DbClock:
    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self.wall = wall  # this node's clock
        self._samples: deque[tuple[float, float]] = deque(maxlen=WINDOW)  # (round trip, offset)
        self.offset_s = 0.0  # PostgreSQL's clock minus this node's (0 until measured)

    def observe(self, sent: float, db: float, received: float) -> float:
        """A ping sent at `sent` and answered at `received` (this node's wall clock) read `db`
        (PostgreSQL's); returns the offset now in use."""
        self._samples.append((received - sent, db - (sent + received) / 2))
        self.offset_s = min(self._samples)[1]
        return self.offset_s

    @property
    def measured(self) -> bool:
        return bool(self._samples)

    def time(self) -> float:
        """Unix time by PostgreSQL's clock."""
        return self.wall() + self.offset_s

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.time(), UTC)
