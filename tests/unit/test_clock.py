"""PostgreSQL's clock from this node's plus a measured offset (pure: readings are handed in)."""

from __future__ import annotations

from datetime import UTC, datetime

from cronos.clock import WINDOW, DbClock


def test_the_offset_is_read_mid_round_trip_and_the_shortest_round_trip_wins() -> None:
    wall = 1000.0
    clock = DbClock(wall=lambda: wall)
    assert not clock.measured and clock.time() == 1000.0  # unmeasured: this node's clock
    # This node is 2 s fast: PostgreSQL read 998.05 halfway through a 100 ms round trip.
    assert clock.observe(1000.0, 998.05, 1000.1) == -2.0
    assert clock.time() == 998.0 and clock.now() == datetime.fromtimestamp(998.0, UTC)
    # A slow round trip (the answer queued 1 s) is less exact: the 100 ms one is kept.
    assert clock.observe(1000.0, 998.1, 1001.0) == -2.0
    # Samples age out: after WINDOW others, only those count (the clock was stepped by NTP).
    for _ in range(WINDOW):
        clock.observe(1000.0, 1000.15, 1000.3)
    assert round(clock.offset_s, 6) == 0.0


def test_a_slow_node_reads_ahead() -> None:
    clock = DbClock(wall=lambda: 50.0)
    clock.observe(50.0, 52.001, 50.002)
    assert round(clock.time(), 6) == 52.0
