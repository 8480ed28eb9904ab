"""cronos.delays: the start delay from the tick, and the two parts it adds up to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronos import delays

TICK = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_retry_held_back_by_its_backoff_then_started_late() -> None:
    due, started = TICK + timedelta(seconds=5), TICK + timedelta(seconds=5.025)
    assert delays.start_delay_s(TICK, started) == 5.025
    assert delays.held_back_s(TICK, due) == 5.0
    assert delays.waited_s(due, started) == 0.025
    assert delays.ms(delays.start_delay_s(TICK, started)) == 5025.0


def test_nothing_but_held_back_until_it_starts() -> None:
    assert delays.start_delay_s(TICK, None) is None and delays.waited_s(TICK, None) is None
    assert delays.held_back_s(TICK, TICK) == 0.0 and delays.ms(None) is None
