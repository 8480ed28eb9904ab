"""Deterministic spread as a window (cronos.spread): the offset the name picks, every kind of schedule
moved by it, the shortest-gap rule, and the fleet view's herd it flattens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronos import spread
from cronos.errors import InvalidInput
from cronos.fleet_starts import Group, starts_per_minute
from cronos.hashed import stable
from cronos.schedule_union import ScheduleEntry
from cronos.schedule_window import job_schedule

T0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)


def test_the_offset_is_the_names_stable_hash_within_the_window() -> None:
    assert spread.offset_s("cache-warm", "10m") == stable("cache-warm", "spread", 600) == 57
    assert spread.offset_s("cache-warm", None) == 0
    offsets = {spread.offset_s(f"job-{i}", "10m") for i in range(200)}
    assert all(0 <= o < 600 for o in offsets) and len(offsets) > 100  # spread, not herded


@pytest.mark.parametrize(
    ("fields", "gap"),
    [
        ({"cron_expression": "0 * * * *"}, timedelta(hours=1)),
        ({"cron_expression": None, "every": "45m"}, timedelta(minutes=45)),
        ({"cron_expression": "0 * * * *", "schedules": (ScheduleEntry(cron="30 * * * *"),)}, timedelta(minutes=30)),
    ],
)
def test_every_tick_of_cron_interval_and_union_moves_by_the_offset(fields: dict[str, object], gap: timedelta) -> None:
    expression = fields.pop("cron_expression")
    plain, _ = job_schedule(expression, "UTC", key="cache-warm", **fields)  # type: ignore[arg-type]
    moved, _ = job_schedule(expression, "UTC", key="cache-warm", spread="10m", **fields)  # type: ignore[arg-type]
    day, shift = T0 + timedelta(days=1), timedelta(seconds=57)
    assert moved.fire_times(T0, day) == [t + shift for t in plain.fire_times(T0 - shift, day - shift)]
    assert spread.shortest_gap(plain.base, T0) == gap


def test_a_window_clamps_the_moved_ticks() -> None:
    moved, _ = job_schedule("0 * * * *", "UTC", key="cache-warm", spread="10m", end_at=T0 + timedelta(hours=1))
    assert moved.fire_times(T0, T0 + timedelta(hours=3)) == [T0 + timedelta(seconds=57)]


def test_a_spread_not_shorter_than_the_shortest_gap_is_refused() -> None:
    hourly, _ = job_schedule("0 * * * *", "UTC")
    assert spread.check("600", hourly, T0) == "10m"  # spelled as `every` is stored
    assert spread.check("59m59s", hourly, T0) == "59m59s"
    with pytest.raises(InvalidInput, match="shortest gap between two ticks \\(1h\\)") as refused:
        spread.check("1h", hourly, T0)
    assert refused.value.field == "$.spread"
    union, _ = job_schedule("0 * * * *", "UTC", schedules=(ScheduleEntry(cron="5 * * * *"),))
    with pytest.raises(InvalidInput, match="\\(5m\\)"):
        spread.check("5m", union, T0)  # :00 and :05: five minutes apart
    with pytest.raises(InvalidInput, match="one-off"):
        spread.check("1m", None, T0)
    with pytest.raises(InvalidInput, match="not a duration"):
        spread.check("soon", hourly, T0)


def test_the_fleet_view_counts_spread_jobs_at_their_offset_and_the_herd_they_flatten() -> None:
    names = tuple(f"sync-{i}" for i in range(30))
    group = Group("0 * * * *", "UTC", 0.0, 30, tuple(range(1, 31)), names, spread="30m")
    starts = starts_per_minute([group], T0, 60)
    expected = [0] * 60
    for name in names:
        expected[spread.offset_s(name, "30m") // 60] += 1
    assert starts.counts == expected and sum(starts.counts) == 30
    assert starts.spread_jobs == 30 and starts.unspread_peak == 30 and max(starts.counts) < 30
