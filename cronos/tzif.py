"""Where a zone may change its UTC offset, read from its own TZif table (RFC 8536), not found by probing.

`candidates(key, low, high)` lists the instants (whole seconds since the epoch) in [low, high)
at which the zone's table or, past its last transition, its POSIX TZ rule (the file's footer)
says a new local time type begins. A candidate is not always an offset change (a change of
abbreviation or of the DST flag alone; permanent DST written as a rule): `cronos.dst` asks
zoneinfo for the offsets either side of each and keeps the real changes.

The file is the one zoneinfo reads for the key: the first found on `zoneinfo.TZPATH`, else the
`tzdata` package's. Pure apart from reading that file once per zone.
"""

from __future__ import annotations

import os
import re
import struct
from bisect import bisect_left
from calendar import monthrange
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache
from importlib import resources
from zoneinfo import TZPATH

_EPOCH = date(1970, 1, 1)
_DAY = 86_400
_HEADER = struct.Struct(">4sc15x6l")  # magic, version, then the six counts
_ZONE = r"(?:<[^>]*>|[A-Za-z]+)"
_OFFSET = r"[+-]?\d{1,3}(?::\d{1,2}){0,2}"
_POSIX = re.compile(rf"{_ZONE}({_OFFSET})(?:{_ZONE}({_OFFSET})?,([^,]+),([^,]+))?")
_DATE = re.compile(r"M(\d{1,2})\.(\d)\.(\d)|J(\d{1,3})|(\d{1,3})")


@dataclass(frozen=True, slots=True)
class _When:
    """A POSIX rule's date (one of Mm.w.d, Jn, n) and its local time of day in seconds."""

    month: int  # Mm.w.d: month, week (5: the last), day of week (0: Sunday); 0 when not this form
    week: int
    weekday: int
    julian: int  # Jn: 1..365, February 29 never counted; -1 when not this form
    day: int  # n: 0..365, February 29 counted; -1 when not this form
    seconds: int

    def local(self, year: int) -> int:
        """The local wall time it names in `year`, as seconds since 1970-01-01T00:00 of that clock."""
        if self.month:
            first, end = monthrange(year, self.month)  # Monday = 0; POSIX counts from Sunday
            day = 1 + (self.weekday - (first + 1)) % 7 + 7 * (self.week - 1)
            while day > end:  # week 5: the last such weekday
                day -= 7
            when = date(year, self.month, day)
        elif self.julian >= 0:
            leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
            when = date(year, 1, 1) + timedelta(days=self.julian - 1 + (leap and self.julian >= 60))
        else:
            when = date(year, 1, 1) + timedelta(days=self.day)
        return (when - _EPOCH).days * _DAY + self.seconds


@dataclass(frozen=True, slots=True)
class _Rule:
    """A footer's daylight rule: DST begins at `start` (a standard wall time), ends at `end` (a DST one)."""

    std: int  # UTC offsets in seconds, east positive
    dst: int
    start: _When
    end: _When

    def changes(self, year: int) -> tuple[int, int]:
        return self.start.local(year) - self.std, self.end.local(year) - self.dst


@dataclass(frozen=True, slots=True)
class Table:
    transitions: tuple[int, ...]  # ascending instants of the explicit table
    rule: _Rule | None  # what follows the last of them; None: nothing changes after it


def _seconds(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    parts = [int(p) for p in text.lstrip("+-").split(":")]
    return sign * sum(p * u for p, u in zip(parts, (3600, 60, 1), strict=False))


def _when(text: str) -> _When:
    day, _, clock = text.partition("/")
    found = _DATE.fullmatch(day)
    if found is None:
        raise ValueError(f"unreadable POSIX TZ date {text!r}")
    month, week, weekday, julian, plain = found.groups()
    seconds = _seconds(clock) if clock else 7200  # 02:00 when not given
    if month:
        return _When(int(month), int(week), int(weekday), -1, -1, seconds)
    return _When(0, 0, 0, int(julian) if julian else -1, int(plain) if plain else -1, seconds)


def rule(footer: str) -> _Rule | None:
    """The daylight rule of a POSIX TZ string (`CET-1CEST,M3.5.0,M10.5.0/3`); None without one."""
    found = _POSIX.fullmatch(footer)
    if found is None or found[3] is None:
        return None  # a fixed offset (or an empty footer): no change past the table
    std = -_seconds(found[1])  # POSIX offsets count west of Greenwich
    dst = -_seconds(found[2]) if found[2] else std + 3600
    return _Rule(std, dst, _when(found[3]), _when(found[4]))


def parse(data: bytes) -> Table:
    """The transitions and footer rule of a TZif file (version 1: its 32-bit table, no rule)."""
    magic, version, isut, isstd, leap, count, types, chars = _HEADER.unpack_from(data)
    if magic != b"TZif":
        raise ValueError("not a TZif file")
    if version == b"\x00":
        return Table(struct.unpack_from(f">{count}l", data, _HEADER.size), None)
    # Version 2+: skip the 32-bit block to the second header, whose 64-bit table is exact.
    start = _HEADER.size + count * 5 + types * 6 + chars + leap * 8 + isstd + isut
    _magic, _version, isut, isstd, leap, count, types, chars = _HEADER.unpack_from(data, start)
    body = start + _HEADER.size
    transitions = struct.unpack_from(f">{count}q", data, body)
    footer = data[body + count * 9 + types * 6 + chars + leap * 12 + isstd + isut :].strip(b"\n")
    return Table(tuple(transitions), rule(footer.decode("ascii")))


def _read(key: str) -> bytes:
    for folder in TZPATH:  # zoneinfo's own search order
        path = os.path.join(folder, key)
        if os.path.isfile(path):
            with open(path, "rb") as file:
                return file.read()
    return resources.files("tzdata").joinpath("zoneinfo", *key.split("/")).read_bytes()


@lru_cache(maxsize=1024)  # more than tzdata has zones: each file is read and parsed once
def table(key: str) -> Table:
    return parse(_read(key))


def _year(instant: int) -> int:
    days = min(max(instant // _DAY, (date.min - _EPOCH).days), (date.max - _EPOCH).days)
    return (_EPOCH + timedelta(days=days)).year


def candidates(key: str, low: int, high: int) -> list[int]:
    """Instants in [low, high) at which zone `key` may change its offset, ascending."""
    zone = table(key)
    explicit = zone.transitions
    found = list(explicit[bisect_left(explicit, low) : bisect_left(explicit, high)])
    if zone.rule is not None:
        last = explicit[-1] if explicit else None
        # A year either side: an offset and a rule's time of day (up to 167 h) move a change by days.
        for year in range(max(2, _year(low) - 1), min(9998, _year(high) + 1) + 1):
            found += (t for t in zone.rule.changes(year) if low <= t < high and (last is None or t > last))
    return sorted(set(found))
