"""timestamptz between PostgreSQL and Cronos: the one codec every connection gets, and the one
check a role makes of the instants it reads (cronos.instants decides the range).

asyncpg's own codec reads PostgreSQL's -infinity/infinity as naive datetimes and fails a whole
query over a value past Python's calendar; this one reads every value aware, so no comparison and
no query can fail over one row, and `unusable_row` lets the role skip a row it cannot compute with.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cronos import instants, metrics

log = logging.getLogger("cronos.store")

# timestamptz on the wire: microseconds from PostgreSQL's epoch; int64's edges are +/-infinity.
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_FIRST_US = (datetime.min.replace(tzinfo=UTC) - _PG_EPOCH) // _US
_LAST_US = (datetime.max.replace(tzinfo=UTC) - _PG_EPOCH) // _US
_INFINITY, _MINUS_INFINITY = 2**63 - 1, -(2**63)
CALENDAR_FIRST, CALENDAR_LAST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


def decode_instant(wire: tuple[int]) -> datetime:
    """A timestamptz as an aware UTC datetime, always. asyncpg's own decoder reads -infinity and
    infinity as naive datetime.min/max (a comparison with them raises TypeError) and raises on a
    value past Python's calendar (the whole query fails): either would stop a role over one row.
    Those decode to the calendar's aware edges, in order, which cronos.instants calls unusable."""
    us = wire[0]
    if us <= _FIRST_US:
        return CALENDAR_FIRST
    if us >= _LAST_US:
        return CALENDAR_LAST
    return _PG_EPOCH + timedelta(microseconds=us)


def encode_instant(value: datetime | date) -> tuple[int]:
    """As asyncpg's own encoder: a naive datetime or a date is local time, the calendar's edges
    are -infinity/infinity (a query's open bound)."""
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        value = value.astimezone()
    us = (value - _PG_EPOCH) // _US
    return (_MINUS_INFINITY if us <= _FIRST_US else _INFINITY if us >= _LAST_US else us,)


_ROW_ID = {"jobs": "job_id", "pauses": "job_id", "blackouts": "blackout_id", "tokens": "token_id"}


def unusable_row(row: Mapping[str, Any], fields: Sequence[str], table: str, key: str = "id") -> bool:
    """True when one of the row's `fields` holds an instant outside cronos.instants' range (an
    older version's, or a hand's): logged with the row's `key` (its id, or a group's ids) and
    counted, and the caller skips the row; a role never computes with it, so one row cannot stop it."""
    for name in fields:
        value = row[name]
        if value is not None and not instants.usable(value):
            log.warning(
                "a stored instant is outside the range Cronos uses: row skipped",
                extra={
                    "event": "store.instant_unusable", "table": table, "field": name, "value": value.isoformat(),
                    _ROW_ID.get(table, "row_id") + ("s" if key == "ids" else ""): row[key],
                },
            )  # fmt: skip
            metrics.ROWS_UNUSABLE_INSTANT.labels(table).inc()
            return True
    return False
