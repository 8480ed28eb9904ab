"""Capped exponential backoff with full jitter (pure: the caller sleeps)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# The longest a role waits between two tries to reach a backend that is away. A try is a
# connect and one round trip, cheap against a refused port; a longer wait would be all delay
# after the backend answers again (issue 13: ticks start within 2 s of Redis answering).
RECONNECT_CAP_S = 0.5


@dataclass
class Backoff:
    base_s: float = 0.1
    cap_s: float = 5.0
    attempts: int = 0
    rng: random.Random = field(default_factory=random.Random)

    def next_delay(self) -> float:
        ceiling = min(self.cap_s, self.base_s * (2**self.attempts))
        self.attempts += 1
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempts = 0
