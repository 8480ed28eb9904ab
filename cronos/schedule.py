"""Cron schedules: validate an expression and a zone, compute fire instants as Vixie cron would.

Pure: never reads the clock (``after``/``until`` are parameters), no I/O beyond zoneinfo
loading tz data; instants come out as aware UTC datetimes. The syntax is read by
`cronos.cron_fields`; the DST rule (fixed-time vs wildcard jobs) is `cronos.dst`. What
each form means, and where it differs from Vixie cron, Quartz and croniter:
docs/cron.md.

Syntax: 5 fields ``minute hour day-of-month month day-of-week``, or 6 with **seconds
first** (``*/5 * * * * *`` every 5 s, ``0 30 9 * * 1-5`` 09:30:00 on weekdays); macros
``@yearly @annually @monthly @weekly @daily @midnight @hourly``. Day of month and day of
week are ANDed when either field starts with ``*`` (or ``?``), ORed otherwise. Zones are
the names the ``tzdata`` package ships, the same on every host.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from importlib import resources
from weakref import WeakValueDictionary
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronos.cron_fields import EXPR, NEVER, CronFields, month_shape, next_table, parse
from cronos.dst import Segment, fire_times, next_fixed, next_wildcard, require_aware, segment
from cronos.errors import InvalidSchedule

_TZ = "$.timezone"
_UTC_NAMES = frozenset({"UTC", "Etc/UTC"})
_EMPTY = (datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC))
_NO_SEGMENT = Segment(_EMPTY[0], _EMPTY[0], timedelta(0), _EMPTY[0])
_MONTH_CACHE = 4096  # months remembered per schedule before starting again
# `@never`'s one "fire time": the last instant of the calendar, so every caller's loop over fire
# times (planner, auditor, hand-over) simply finds none in its window. `upcoming` says None.
NEVER_AT = datetime.max.replace(tzinfo=UTC)
Fields = tuple[int, int, int, int, int, int]  # year, month, day, hour, minute, second


@lru_cache(maxsize=1)
def tzdata_zones() -> frozenset[str]:
    """The zone names of the ``tzdata`` package (links like ``US/Pacific`` included)."""
    return frozenset(resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split())


def _zone(name: object) -> ZoneInfo:
    # Only tzdata's names: `right/UTC`, `posix/...` or `localtime` exist on some hosts only.
    if not isinstance(name, str) or name not in tzdata_zones():
        raise InvalidSchedule(_TZ, f"unknown time zone {name!r} (IANA names as the tzdata package ships them)")
    return load_zone(name)


def load_zone(name: str) -> ZoneInfo:
    """The zone of a name its caller accepts; InvalidSchedule when it does not load after all."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidSchedule(_TZ, f"unknown time zone {name!r}") from None


@dataclass(frozen=True, slots=True, weakref_slot=True)
class ZonedSchedule:
    """What every meaning of a stored schedule has: an expression in one time zone, its fire times
    found by its `next_after` (remembering its last answer)."""

    expression: str
    timezone: str = "UTC"
    has_seconds: bool = False
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)
    _memo: tuple[datetime, datetime] = field(init=False, repr=False, compare=False)  # last (after, answer)

    def next_after(self, after: datetime) -> datetime:
        """The first fire instant strictly after ``after`` (aware, any zone), in UTC."""
        raise NotImplementedError

    def fire_times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
        """Fire instants ``t`` with ``after < t <= until``, ascending, UTC, at most ``limit``."""
        return fire_times(self.next_after, after, until, limit)


@dataclass(frozen=True, slots=True)
class Schedule(ZonedSchedule):
    """A validated cron schedule in one time zone; build it with :func:`parse_schedule`."""

    _fields: CronFields = field(init=False, repr=False, compare=False)
    _utc: bool = field(init=False, repr=False, compare=False)
    _never: bool = field(init=False, repr=False, compare=False)
    # t[v]: the first matching value >= v, -1 to carry into the next larger unit.
    _seconds: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _minutes: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _hours: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _months: tuple[int, ...] = field(init=False, repr=False, compare=False)
    # matching days per (year << 4 | month), and per month shape (length, weekday of the 1st)
    _by_month: dict[int, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    _by_shape: dict[tuple[int, int], tuple[int, ...]] = field(init=False, repr=False, compare=False)
    _segment: Segment = field(init=False, repr=False, compare=False)  # the last stretch of one offset

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise InvalidSchedule(EXPR, "expression must be a string")
        parsed = parse(self.expression)
        if parsed.has_seconds != self.has_seconds:
            raise ValueError(f"has_seconds={self.has_seconds} contradicts {self.expression!r}")
        set_ = object.__setattr__  # frozen: derived fields are set once, here
        set_(self, "_zone", _zone(self.timezone))
        set_(self, "_fields", parsed)
        set_(self, "_utc", self.timezone in _UTC_NAMES)
        set_(self, "_never", self.expression.strip(" \t").lower() == NEVER)
        set_(self, "_seconds", next_table(parsed.seconds, 60))
        set_(self, "_minutes", next_table(parsed.minutes, 60))
        set_(self, "_hours", next_table(parsed.hours, 24))
        set_(self, "_months", next_table(parsed.months, 13))
        set_(self, "_by_month", {})
        set_(self, "_by_shape", {})
        set_(self, "_memo", _EMPTY)
        set_(self, "_segment", _NO_SEGMENT)

    @property
    def wildcard(self) -> bool:
        """Vixie's DST class: minute or hour starts with ``*`` (follows real time)."""
        return self._fields.wildcard

    @property
    def never(self) -> bool:
        """``@never``: no fire time (the job runs by hand or after its parents)."""
        return self._never

    def next_after(self, after: datetime) -> datetime:
        """The first fire instant strictly after ``after`` (aware, any zone), in UTC; OverflowError
        when the calendar (year 9999) ends first. ``@never``: NEVER_AT."""
        if self._never:
            if after >= NEVER_AT:
                raise OverflowError(f"no fire time after {after.isoformat()} before the year 10000")
            return NEVER_AT
        if after.tzinfo is not UTC:
            require_aware(after, "after")
            after = after.astimezone(UTC)
        low, high = self._memo
        if low <= after < high:  # nothing fires in (low, high), so the answer is unchanged
            return high
        try:
            if self._utc:
                y, mo, d, h, mi, s = self._after(after)
                result = datetime(y, mo, d, h, mi, s, tzinfo=UTC)
            elif (found := self._in_segment(after)) is not None:
                result = found
            elif self._fields.wildcard:
                result = next_wildcard(self._zone, self._next_wall, after)
            else:
                result = next_fixed(self._zone, self._next_wall, after)
        except ValueError as exc:  # datetime's "year 10000 is out of range": one error for callers
            raise OverflowError(f"no fire time after {after.isoformat()} before the year 10000") from exc
        object.__setattr__(self, "_memo", (after, result))  # one tuple: safe across threads
        return result

    def _in_segment(self, after: datetime) -> datetime | None:
        """The answer when it lies in ``after``'s stretch of one UTC offset (most calls), else None.

        Inside such a stretch wall time is instant + offset, so the first matching wall time
        is the answer; a fixed-time job must also be past any wall times the stretch repeats.
        """
        seg = self._segment
        if not seg.start <= after < seg.end:
            seg = segment(self._zone, after)
            object.__setattr__(self, "_segment", seg)
        if after < seg.settled and not self._fields.wildcard:
            return None
        y, mo, d, h, mi, s = self._after(after + seg.offset)  # UTC-tagged, but its fields are the wall time
        found = datetime(y, mo, d, h, mi, s, tzinfo=UTC) - seg.offset
        return found if found < seg.end else None

    def _next_wall(self, wall: datetime) -> datetime:
        """The first matching naive wall time strictly after ``wall``."""
        return datetime(*self._after(wall))

    def _after(self, wall: datetime) -> Fields:
        """The first matching wall time strictly after the fields of ``wall`` (its tzinfo unread)."""
        y, mo, d, h = wall.year, wall.month, wall.day, wall.hour
        mi, s = (wall.minute, wall.second + 1) if self.has_seconds else (wall.minute + 1, 0)
        seconds, minutes, hours, months, by_month = (
            self._seconds,
            self._minutes,
            self._hours,
            self._months,
            self._by_month,
        )
        while True:  # each unit may overflow by one (second 60, hour 24, day 32, month 13): carry it
            if (m := months[mo]) != mo:
                y, mo = (y + 1, months[1]) if m < 0 else (y, m)
                d, h, mi, s = 1, 0, 0, 0
            days = by_month.get(y << 4 | mo) or self._days(y, mo)
            i = bisect_left(days, d)
            if i == len(days):
                mo, d, h, mi, s = mo + 1, 1, 0, 0, 0
                continue
            if days[i] != d:
                d, h, mi, s = days[i], 0, 0, 0
            if (hh := hours[h]) != h:
                if hh < 0:
                    d, h, mi, s = d + 1, 0, 0, 0
                    continue
                h, mi, s = hh, 0, 0
            if (mm := minutes[mi]) != mi:
                if mm < 0:
                    h, mi, s = h + 1, 0, 0
                    continue
                mi, s = mm, 0
            if (ss := seconds[s]) < 0:
                mi, s = mi + 1, 0
                continue
            return y, mo, d, h, mi, ss

    def _days(self, year: int, month: int) -> tuple[int, ...]:
        key = year << 4 | month
        days = self._by_month.get(key)
        if days is None:
            shape = month_shape(year, month)
            days = self._by_shape.get(shape)
            if days is None:
                days = self._by_shape[shape] = self._fields.days.in_month(*shape)
            if len(self._by_month) >= _MONTH_CACHE:
                self._by_month.clear()
            self._by_month[key] = days
        return days


def upcoming(next_after: Callable[[datetime], datetime], now: datetime) -> datetime | None:
    """The next fire instant after ``now`` (``next_after`` of any schedule), None when there is none
    (``@never``, or the calendar ends)."""
    try:
        found = next_after(now)
    except OverflowError:
        return None
    return None if found >= NEVER_AT else found


# Schedules something still holds (a leader's 85,000 groups), found again by whoever parses the same
# expression (its auditor, each minute): one object each, however many parse it.
_LIVE: WeakValueDictionary[tuple[str, str], Schedule] = WeakValueDictionary()


def parse_schedule(expression: str, timezone: str = "UTC") -> Schedule:
    """Validate ``expression`` in IANA zone ``timezone``; raise InvalidSchedule if bad.

    Memoised: many jobs share few distinct schedules, and Schedule is immutable.
    """
    if not isinstance(expression, str):
        raise InvalidSchedule(EXPR, "expression must be a string")
    key = (expression, timezone)
    found = _LIVE.get(key)
    if found is None:
        found = _LIVE[key] = _parse_schedule(expression, timezone)
    return found


@lru_cache(maxsize=4096)
def _parse_schedule(expression: str, timezone: str) -> Schedule:
    text = expression.strip(" \t")
    has_seconds = not text.startswith("@") and len(text.split()) == 6
    return Schedule(text, timezone, has_seconds)
