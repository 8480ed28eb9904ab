"""Capped exponential backoff with full jitter (pure: the caller sleeps)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# The longest a role waits between two tries to reach a backend that is away. A try is a
# connect and one round trip, cheap against a refused port; a longer wait would be all delay
# after the backend answers again (issue 13: ticks start within 2 s of Redis answering).
RECONNECT_CAP_S = 0.5

# Past this many doublings any positive base is over any cap a role uses (2**64 * 1 ns is 584
# years). The exponent never goes further, so an outage of any length cannot overflow it: at
# attempt 1,024 `base * 2**attempts` was an OverflowError that ended the role (issue 22).
MAX_DOUBLINGS = 64


@dataclass
class Backoff:
    base_s: float = 0.1
    cap_s: float = 5.0
    attempts: int = 0  # doublings so far: it stops growing once the cap is reached
    rng: random.Random = field(default_factory=random.Random)

    def next_delay(self) -> float:
        ceiling = min(self.cap_s, self.base_s * 2.0 ** min(self.attempts, MAX_DOUBLINGS))
        if ceiling < self.cap_s and self.attempts < MAX_DOUBLINGS:
            self.attempts += 1
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempts = 0
