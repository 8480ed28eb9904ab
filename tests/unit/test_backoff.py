from __future__ import annotations

import random

import pytest

from cronos.backoff import Backoff


def test_backoff_grows_then_caps_and_resets() -> None:
    backoff = Backoff(base_s=0.1, cap_s=1.0, rng=random.Random(1))
    delays = [backoff.next_delay() for _ in range(8)]
    assert 0.05 <= delays[0] <= 0.1
    assert all(d <= 1.0 for d in delays)
    assert delays[-1] >= 0.5  # at the cap, full jitter stays in [cap/2, cap]
    backoff.reset()
    assert backoff.next_delay() <= 0.1


@pytest.mark.parametrize("attempts", [0, 1023, 1024, 10**6])
def test_backoff_saturates_at_any_attempt(attempts: int) -> None:
    """Issue 22: `base * 2**attempts` overflowed at attempt 1,024 and the OverflowError ended the
    role (a dispatcher after 6.5 min of PostgreSQL away). Past the cap the delay stays at it."""
    backoff = Backoff(base_s=0.1, cap_s=0.5, attempts=attempts, rng=random.Random(1))
    first = backoff.next_delay()
    assert (0.05 <= first <= 0.1) if attempts == 0 else (0.25 <= first <= 0.5)
    assert all(0 < backoff.next_delay() <= 0.5 for _ in range(3))
    assert backoff.attempts <= max(attempts, 64)


def test_a_long_outage_keeps_the_backoff_at_its_cap() -> None:
    backoff = Backoff(base_s=1e-6, cap_s=1e-3, rng=random.Random(2))
    delays = [backoff.next_delay() for _ in range(5000)]
    assert all(5e-4 <= d <= 1e-3 for d in delays[20:])
    assert backoff.attempts == 10  # the exponent stopped growing at the cap (1e-6 * 2**10 > 1e-3)
    backoff.reset()
    assert backoff.next_delay() <= 1e-6
