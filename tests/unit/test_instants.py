"""The stored range of instants (cronos.instants) and the timestamptz codec that applies it (issue 36)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronos import instants
from cronos.errors import InvalidInput
from cronos.store.timestamps import CALENDAR_FIRST, CALENDAR_LAST, decode_instant, encode_instant

INFINITY, MINUS_INFINITY = 2**63 - 1, -(2**63)


@pytest.mark.parametrize(
    ("text", "usable"),
    [
        ("0001-01-01T00:00:00+00:00", False),  # asyncpg's -infinity
        ("9999-12-31T23:59:59.999999+00:00", False),  # and its infinity
        ("9999-12-31T23:00:00-14:00", False),  # year 10000 in UTC
        ("0001-01-01T23:59:59+14:00", False),  # year 0 in UTC
        ("0002-01-01T00:00:00+00:01", False),
        ("9999-01-01T00:00:00+00:00", False),
        ("2026-01-01T00:00:00", False),  # no offset: no instant
        ("0002-01-01T00:00:00+00:00", True),
        ("0002-01-01T00:00:00-00:01", True),
        ("9998-12-31T23:59:59.999999+00:00", True),
        ("9998-12-31T23:59:59.999999+14:00", True),
    ],
)
def test_the_range_is_years_2_to_9998_in_utc_with_an_offset(text: str, usable: bool) -> None:
    value = datetime.fromisoformat(text)
    assert instants.usable(value) is usable
    if usable:
        assert instants.check(value, "$.at") is value
    else:
        with pytest.raises(InvalidInput) as refused:
            instants.check(value, "$.at")
        assert refused.value.field == "$.at" and "0002-01-01T00:00:00Z" in refused.value.message


def test_infinities_and_values_past_the_calendar_decode_aware_at_its_edges_and_are_unusable() -> None:
    for wire, edge in ((INFINITY, CALENDAR_LAST), (MINUS_INFINITY, CALENDAR_FIRST), (10**18, CALENDAR_LAST)):
        decoded = decode_instant((wire,))
        assert decoded == edge and decoded.tzinfo is UTC and not instants.usable(decoded)
    assert encode_instant(CALENDAR_LAST) == (INFINITY,) and encode_instant(CALENDAR_FIRST) == (MINUS_INFINITY,)


@given(
    st.datetimes(
        min_value=datetime(2, 1, 2),
        max_value=datetime(9998, 12, 30),
        timezones=st.integers(-1439, 1439).map(lambda m: timezone(timedelta(minutes=m))),
    )
)
def test_every_usable_instant_encodes_and_decodes_to_itself(value: datetime) -> None:
    back = decode_instant(encode_instant(value))
    assert back == value and back.tzinfo is UTC
