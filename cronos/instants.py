"""The instants Cronos stores: one range, decided here, for what the API accepts and what roles use.

An instant is usable when it carries an offset and lies in [EARLIEST, END) in UTC: years 2 to
9998. Why not Python's years 1-9999: asyncpg writes the calendar's first and last microsecond
(0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999Z) as PostgreSQL's -infinity/infinity, and an
instant a day from either edge leaves the calendar once a role shows it in a zone (offsets reach
+14:00 and -12:00; Python allows up to 24 h) or a schedule looks past it (cronos.dst reads a year
either side). A year of margin at each end keeps every such step inside; PostgreSQL's timestamptz
(4713 BC to 294276 AD, microseconds) holds the whole range exactly.

Pure: no clock, no I/O. The API refuses anything else with a 422 naming the field (`check`); a
value already stored outside the range (an older version's, or a hand's) is skipped by the role
reading it (cronos.store.timestamps.unusable_row), never computed with.
"""

from __future__ import annotations

from datetime import UTC, datetime

from cronos.errors import InvalidInput

EARLIEST = datetime(2, 1, 1, tzinfo=UTC)  # the first usable instant
END = datetime(9999, 1, 1, tzinfo=UTC)  # the first instant past the range
RANGE = "between 0002-01-01T00:00:00Z and 9998-12-31T23:59:59.999999Z, with an offset (Z or ±hh:mm)"


def usable(value: datetime) -> bool:
    """An aware instant inside [EARLIEST, END): one that round-trips exactly through PostgreSQL."""
    try:
        return EARLIEST <= value < END  # compared in UTC, even 9999-12-31T23:00-14:00 (year 10000)
    except TypeError:  # naive: no offset, so no instant
        return False


def check(value: datetime, field: str) -> datetime:
    """`value` when usable, else InvalidInput naming `field` (the API's 422)."""
    if not usable(value):
        raise InvalidInput(field, f"must be {RANGE}")
    return value
