"""Vixie cron's DST rule: matching wall-clock times of a zone -> fire instants (pure).

``next_wall(w)`` gives the first matching naive wall time strictly after ``w``. Two
classes of job, as Vixie cron (and cronie) sort them by the minute and hour fields:

* fixed (neither field starts with ``*``): an appointment. A matching time skipped by a
  spring-forward gap fires once, at the instant the gap ends (several skipped times
  collapse into that one fire); a time repeated by a fall-back fires once, first pass.
  This is cron's "virtual time", which never goes back and catches up after a jump.
* wildcard: follows real time. Every instant whose wall clock matches fires, both passes
  of a repeated hour included; times inside a gap never happen and are not replayed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from cronos.tzif import candidates

NextWall = Callable[[datetime], datetime]
_US = timedelta(microseconds=1)


def offsets(zone: ZoneInfo, wall: datetime) -> tuple[timedelta, timedelta]:
    """Offsets of a wall time read before (fold=0) and after (fold=1) a change.

    Equal: it exists once. First larger: it repeats (fall-back). Smaller: a gap skips it.
    """
    before = wall.replace(tzinfo=zone, fold=0).utcoffset()
    after = wall.replace(tzinfo=zone, fold=1).utcoffset()
    assert before is not None and after is not None  # zoneinfo always knows the offset
    return before, after


def transition(zone: ZoneInfo, wall: datetime) -> datetime:
    """The instant of the offset change that skips or repeats ``wall``, to the second."""
    old, new = offsets(zone, wall)
    # Reading the wall time with the larger offset lands before the change; with the
    # smaller one, after it. tzdata changes happen on whole seconds.
    low = math.floor((wall - max(old, new)).replace(tzinfo=UTC).timestamp())
    high = math.ceil((wall - min(old, new)).replace(tzinfo=UTC).timestamp())
    return _first_with(zone, low, high, new)


def _first_with(zone: ZoneInfo, low: int, high: int, new: timedelta) -> datetime:
    """The first whole second in (low, high] whose offset is ``new`` (it is at ``high``)."""
    while high - low > 1:
        middle = (low + high) // 2
        if offset_of(zone, middle) == new:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def instant(wall: datetime, offset: timedelta) -> datetime:
    return (wall - offset).replace(tzinfo=UTC)


def _next_real_wall(zone: ZoneInfo, next_wall: NextWall, wall: datetime) -> tuple[datetime, timedelta, timedelta]:
    """Like ``next_wall`` but skipping times inside a gap; also returns their offsets."""
    found = next_wall(wall)
    before, after = offsets(zone, found)
    while before < after:
        gap_end = (transition(zone, found) + after).replace(tzinfo=None)
        found = next_wall(gap_end - _US)
        before, after = offsets(zone, found)
    return found, before, after


def next_fixed(zone: ZoneInfo, next_wall: NextWall, after: datetime) -> datetime:
    """The fixed-time job's first fire strictly after ``after``."""
    # Cron's virtual time is the latest wall time seen so far: inside the second pass of
    # a repeated hour it is still the end of the first pass.
    local = after.astimezone(zone)
    wall = local.replace(tzinfo=None, fold=0)
    if local.fold:
        first_pass_offset = offsets(zone, wall)[0]
        end = transition(zone, wall) + first_pass_offset
        wall = end.replace(tzinfo=None) - _US
    found = next_wall(wall)
    before, after_change = offsets(zone, found)
    if before < after_change:  # skipped by a gap: fire once, when the gap ends
        return transition(zone, found)
    return instant(found, before)


def next_wildcard(zone: ZoneInfo, next_wall: NextWall, after: datetime) -> datetime:
    """The wildcard job's first fire strictly after ``after``."""
    # Two monotonic readings: fold=0 (first pass) and fold=1 (second pass); they only
    # differ inside a repeated hour. The answer is the earlier of the two.
    local = after.astimezone(zone)
    wall = local.replace(tzinfo=None, fold=0)
    if local.fold:  # second pass: the first pass is already behind us
        found, _, second_pass = _next_real_wall(zone, next_wall, wall)
        return instant(found, second_pass)
    found, first_pass, _ = _next_real_wall(zone, next_wall, wall)
    best = instant(found, first_pass)
    old, new = offsets(zone, wall)
    if old > new:  # first pass of a repeated hour: the wall clock will rewind
        rewind = (transition(zone, wall) + new).replace(tzinfo=None)
        again, _, second_pass = _next_real_wall(zone, next_wall, rewind - _US)
        best = min(best, instant(again, second_pass))
    return best


def require_aware(value: datetime, name: str) -> None:
    if value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, got {value!r}")


def fire_times(
    next_after: Callable[[datetime], datetime], after: datetime, until: datetime, limit: int | None
) -> list[datetime]:
    """Fire instants ``t`` with ``after < t <= until``, ascending, at most ``limit``."""
    require_aware(until, "until")
    times: list[datetime] = []
    current = after
    while limit is None or len(times) < limit:
        current = next_after(current)
        if current > until:
            break
        times.append(current)
    return times


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of real time [start, end) with one UTC offset: wall = instant + offset."""

    start: datetime
    end: datetime
    offset: timedelta
    # From here on no wall time repeats one of before `start` (the clock went back that far).
    settled: datetime


Change = tuple[datetime, timedelta, timedelta]  # instant, old offset, new offset


def _offset_at(zone: ZoneInfo, at: datetime) -> timedelta:
    offset = at.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def offset_of(zone: ZoneInfo, second: int) -> timedelta:
    """The zone's offset at a whole second since the epoch: the one probe of a transition's search."""
    offset = datetime.fromtimestamp(second, zone).utcoffset()
    assert offset is not None
    return offset


@lru_cache(maxsize=4096)  # (zone, year) pairs: a few KB each at most, cheap to find again
def _changes(zone: ZoneInfo, year: int) -> tuple[Change, ...]:
    """The zone's offset changes in a UTC year: the instants its own table names (cronos.tzif), each
    kept when zoneinfo's offsets either side of it differ. Two probes per candidate, a few a year."""
    low = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    high = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    out = []
    for second in candidates(zone.key, low, high):
        old, new = offset_of(zone, second - 1), offset_of(zone, second)
        if old != new:
            out.append((datetime.fromtimestamp(second, UTC), old, new))
    return tuple(out)


def segment(zone: ZoneInfo, at: datetime) -> Segment:
    """The segment holding the aware UTC instant ``at`` (bounds looked for a year either side)."""
    year = at.year
    changes = [c for y in (year - 1, year, year + 1) if 1 < y < 9999 for c in _changes(zone, y)]
    start, settled = datetime(max(1, year - 1), 1, 1, tzinfo=UTC), None
    end = datetime(min(9999, year + 1), 12, 31, tzinfo=UTC)
    for when, old, new in changes:
        if when <= at:
            start, settled = when, when + max(old - new, timedelta(0))
        else:
            end = when
            break
    return Segment(start, end, _offset_at(zone, at), settled or start)
