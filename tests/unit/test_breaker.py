"""The circuit breaker's decision (cronos.breaker): pure, over the facts the leader reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronos.breaker import Facts, Trip, counted, note, trips

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("facts", "threshold", "expected"),
    [
        (Facts("active", 2, None), 3, False),  # below the threshold
        (Facts("active", 3, None), 3, True),  # reaches it
        (Facts("active", 9, T0), 3, True),  # past it (a leader that was away)
        (Facts("paused", 5, None), 3, False),  # paused already: nothing to do
        (Facts("ended", 5, None), 3, False),
        (Facts("active", 5, None), 0, False),  # no breaker
        # Resumed by hand after a trip at a streak of 3: it takes 3 more failures to trip again ...
        (Facts("active", 4, None, Trip(T0, 3)), 3, False),
        (Facts("active", 6, None, Trip(T0, 3)), 3, True),
        # ... unless a success after the trip started a new streak, counted whole.
        (Facts("active", 3, T0 + timedelta(seconds=1), Trip(T0, 3)), 3, True),
        (Facts("active", 2, T0 + timedelta(seconds=1), Trip(T0, 3)), 3, False),
    ],
)
def test_trips(facts: Facts, threshold: int, expected: bool) -> None:
    assert trips(facts, threshold) is expected


def test_the_note_says_why() -> None:
    facts = Facts("active", 7, None, Trip(T0, 2))
    assert counted(facts) == 5
    assert note(facts, 5) == "paused by the circuit breaker after 5 failed runs in a row (threshold 5)"
