from __future__ import annotations

import random

from cronos.backoff import Backoff


def test_backoff_grows_then_caps_and_resets() -> None:
    backoff = Backoff(base_s=0.1, cap_s=1.0, rng=random.Random(1))
    delays = [backoff.next_delay() for _ in range(8)]
    assert 0.05 <= delays[0] <= 0.1
    assert all(d <= 1.0 for d in delays)
    assert delays[-1] >= 0.5  # at the cap, full jitter stays in [cap/2, cap]
    backoff.reset()
    assert backoff.next_delay() <= 0.1
