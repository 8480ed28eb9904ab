"""The leader's retention plan: which day partitions to create and which to drop, for a `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronos.store.partitions import Partition
from dispatcher.retention import AHEAD_DAYS, DAY, NewDay, plan

NOW = datetime(2030, 1, 10, 15, 30, tzinfo=UTC)
MIDNIGHT = datetime(2030, 1, 10, tzinfo=UTC)


def day(offset: int) -> Partition:
    lower = MIDNIGHT + offset * DAY
    return Partition(name=f"runs_{lower:%Y%m%d}", is_default=False, lower=lower, upper=lower + DAY)


DEFAULT = Partition(name="runs_default", is_default=True, lower=None, upper=None)


def test_today_and_the_days_ahead_are_created_when_missing() -> None:
    todo = plan([DEFAULT, day(0), day(2)], NOW, 0)
    assert todo.create == [
        NewDay(f"runs_{MIDNIGHT + n * DAY:%Y%m%d}", MIDNIGHT + n * DAY, MIDNIGHT + (n + 1) * DAY)
        for n in range(AHEAD_DAYS + 1)
        if n not in (0, 2)
    ]
    assert plan([DEFAULT, *(day(n) for n in range(AHEAD_DAYS + 1))], NOW, 0).create == []


def test_a_partition_of_everything_before_a_midnight_covers_its_days() -> None:
    legacy = Partition(name="runs_before_20300112", is_default=False, lower=None, upper=MIDNIGHT + 2 * DAY)
    assert [d.lower for d in plan([legacy], NOW, 0).create] == [MIDNIGHT + n * DAY for n in range(2, AHEAD_DAYS + 1)]


def test_only_days_wholly_past_retention_are_dropped() -> None:
    parts = [DEFAULT, *(day(n) for n in range(-40, 4))]
    todo = plan(parts, NOW, 30 * 86_400)
    # The horizon is 2029-12-11 15:30: the day ending at 2029-12-11 00:00 goes, the one around it stays.
    assert todo.drop == [f"runs_{MIDNIGHT + n * DAY:%Y%m%d}" for n in range(-40, -30)]
    assert todo.purge_before == NOW - timedelta(days=30)


def test_retention_zero_keeps_everything() -> None:
    todo = plan([DEFAULT, *(day(n) for n in range(-400, 4))], NOW, 0)
    assert todo.drop == [] and todo.purge_before is None


def test_a_clock_in_another_zone_plans_the_same_utc_days() -> None:
    elsewhere = NOW.astimezone(datetime.fromisoformat("2030-01-10T23:00:00+09:00").tzinfo)  # already the 11th there
    assert plan([DEFAULT], elsewhere, 0) == plan([DEFAULT], NOW, 0)
