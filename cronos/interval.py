"""Interval schedules (issue 25): `every: 90m` fires at anchor + k·every, in elapsed time. Pure.

A duration is written as whole units, largest first (`90s`, `90m`, `1h30m`, `2d`, `1d12h`), or as
a number of seconds; it is stored in its canonical spelling (`1h30m` for `90m` or 5400), so two
jobs with the same interval compare equal and share the leader's computation. Between 1 s and
366 days, in whole seconds.

The anchor is an instant; none given means the Unix epoch (1970-01-01T00:00:00Z), so `every: 1h`
fires on the hour and `every: 1d` at midnight UTC, and jobs with the same interval fire together.
Ticks are anchor + k·every for every integer k (before the anchor too): UTC arithmetic, so a DST
change moves no tick (the job's time zone only changes how a tick is shown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronos.errors import InvalidInput, InvalidSchedule

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # the anchor when none is given
MIN_S = 1
MAX_S = 366 * 86_400
FIELD = "$.every"

_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
_SPELLING = re.compile(r"(?:(\d{1,9})d)?(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?")
_US = timedelta(microseconds=1)
EXAMPLES = "90s, 90m, 1h30m, 2d or a number of seconds"


def every_seconds(value: str | int | float, field: str = FIELD) -> int:
    """A duration as `every` takes it, in seconds; InvalidInput naming `field` otherwise."""
    if isinstance(value, bool):
        raise InvalidInput(field, f"must be a duration ({EXAMPLES})")
    if isinstance(value, int | float):
        if value != value or not float(value).is_integer():  # NaN, 1.5
            raise InvalidInput(field, "must be a whole number of seconds")
        seconds = int(value)
    else:
        text = value.strip().lower()
        if text.isascii() and text.isdigit() and len(text) <= 12:
            seconds = int(text)
        else:
            match = _SPELLING.fullmatch(text.replace(" ", ""))
            if not text or match is None or not any(match.groups()):
                raise InvalidInput(field, f"{value[:40]!r} is not a duration ({EXAMPLES})")
            seconds = sum(int(n) * unit for n, (_, unit) in zip(match.groups(), _UNITS, strict=True) if n)
    if seconds < MIN_S:
        raise InvalidInput(field, "must be at least 1 s")
    if seconds > MAX_S:
        raise InvalidInput(field, f"must be at most {MAX_S // 86_400} days")
    return seconds


def spell(seconds: int) -> str:
    """The canonical spelling of a duration: `1h30m`, `2d`, `45s`."""
    parts = []
    for name, unit in _UNITS:
        count, seconds = divmod(seconds, unit)
        if count:
            parts.append(f"{count}{name}")
    return "".join(parts) or "0s"


def canonical(value: str | int | float, field: str = FIELD) -> str:
    """`every` as it is stored: checked, then spelled canonically."""
    return spell(every_seconds(value, field))


@dataclass(frozen=True, slots=True)
class Interval:
    """Fires at anchor + k·every (every in seconds), for every integer k: a NextAfter."""

    every_s: int
    anchor: datetime = EPOCH

    def next_after(self, after: datetime) -> datetime:
        """The first tick strictly after `after`. OverflowError past year 9999 (the window ends it)."""
        step = self.every_s * 1_000_000
        elapsed = (after - self.anchor) // _US  # microseconds, exact (no float)
        return self.anchor + (elapsed // step + 1) * step * _US

    def describe(self) -> str:
        anchor = "the Unix epoch" if self.anchor == EPOCH else f"{self.anchor.astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z"
        return f"every {spell(self.every_s)} of elapsed time from {anchor} (DST moves no tick)"


def interval_of(every: str, anchor: datetime | None) -> Interval:
    """The schedule of a stored `every` (canonical spelling) and anchor (None: the epoch)."""
    if anchor is not None and anchor.tzinfo is None:  # asyncpg's -infinity/infinity: UTC
        anchor = anchor.replace(tzinfo=UTC)
    try:
        seconds = every_seconds(every)
    except InvalidInput as exc:  # a row the checks of its day let through: not dispatched, as a bad expression
        raise InvalidSchedule(exc.field, exc.message) from None
    return Interval(seconds, EPOCH if anchor is None else anchor)
