"""A zone's offset changes come from its own TZif table (cronos.tzif), not from probing the year:
the same changes as a six-hourly scan finds, for a few probes of zoneinfo instead of ~1,500, so a
preview's first computation for a (zone, year) is cheap (issue 22, item 5)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from api.routes_schedule import HORIZON, preview
from cronos import dst, tzif
from cronos.schedule import Schedule, tzdata_zones

SIX_HOURS = timedelta(hours=6)


def _scanned(zone: ZoneInfo, year: int) -> tuple[dst.Change, ...]:
    """The changes of a UTC year as the module found them before: a probe every six hours, then
    bisection to the second (tzdata never changes an offset twice within six hours)."""
    out = []
    at, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    old = at.astimezone(zone).utcoffset()
    while at < end:
        new = (at + SIX_HOURS).astimezone(zone).utcoffset()
        assert old is not None and new is not None
        if new != old and at + SIX_HOURS < end:  # a change at the next year's first instant is that year's
            low = int(at.timestamp())
            out.append((dst._first_with(zone, low, low + int(SIX_HOURS.total_seconds()), new), old, new))
        at, old = at + SIX_HOURS, new
    return tuple(out)


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts zoneinfo probes (cronos.dst.offset_of), every cache emptied first."""
    counted: list[int] = []
    real = dst.offset_of

    def offset_of(zone: ZoneInfo, second: int) -> timedelta:
        counted.append(second)
        return real(zone, second)

    dst._changes.cache_clear()
    monkeypatch.setattr(dst, "offset_of", offset_of)
    yield counted
    dst._changes.cache_clear()


def test_the_table_gives_the_changes_a_scan_finds() -> None:
    rng = random.Random(22)
    zones = [*rng.sample(sorted(tzdata_zones()), 40), "Europe/Berlin", "America/Santiago", "Africa/Casablanca"]
    for key in zones:
        zone = ZoneInfo(key)
        for year in (2, 1890, 1942, 1970, 2007, 2026, 2037, 2038, 2100, rng.randint(2101, 9998), 9998):
            assert dst._changes(zone, year) == _scanned(zone, year), (key, year)


def test_a_posix_rule_names_its_changes() -> None:
    berlin = tzif.rule("CET-1CEST,M3.5.0,M10.5.0/3")
    assert berlin is not None
    spring, autumn = berlin.changes(2026)
    assert datetime.fromtimestamp(spring, UTC) == datetime(2026, 3, 29, 1, tzinfo=UTC)
    assert datetime.fromtimestamp(autumn, UTC) == datetime(2026, 10, 25, 1, tzinfo=UTC)
    santiago = tzif.rule("<-04>4<-03>,M9.1.6/24,M4.1.6/24")  # 24:00 of the first Saturday
    assert santiago is not None
    start, end = santiago.changes(2026)
    assert datetime.fromtimestamp(start, UTC) == datetime(2026, 9, 6, 4, tzinfo=UTC)
    assert datetime.fromtimestamp(end, UTC) == datetime(2026, 4, 5, 3, tzinfo=UTC)
    julian = tzif.rule("XXX3YYY,J60/1,300")  # J60: March 1 in any year; 300 counts February 29; 02:00 by default
    assert julian is not None
    assert datetime.fromtimestamp(julian.changes(2028)[0], UTC) == datetime(2028, 3, 1, 4, tzinfo=UTC)
    assert datetime.fromtimestamp(julian.changes(2028)[1], UTC) == datetime(2028, 10, 27, 4, tzinfo=UTC)
    assert tzif.rule("UTC0") is None and tzif.rule("<+0545>-5:45") is None


def test_a_first_year_of_a_zone_costs_a_few_probes(probes: list[int]) -> None:
    dst.segment(ZoneInfo("Europe/Berlin"), datetime(4321, 6, 1, tzinfo=UTC))  # three years looked at
    assert len(probes) <= 3 * 2 * 2  # two candidates a year, two probes each


def test_a_leap_day_preview_of_100_examines_a_bounded_number_of_instants(probes: list[int]) -> None:
    after = datetime(2100, 1, 1, tzinfo=UTC)
    found = preview(Schedule("0 0 29 2 *", "America/Chicago"), after, 100)
    assert found.horizon == after + HORIZON
    assert 20 <= len(found.fire_times) <= 25  # a century of February 29ths, not 400 years
    assert all(t.at <= found.horizon for t in found.fire_times)
    # Each next_after (one per fire time, one more past the horizon) looks at three years of two
    # changes each, two probes a change: the six-hourly scan made 1,460 probes a year.
    assert len(probes) <= (len(found.fire_times) + 1) * 3 * 2 * 2
