"""cronos/schedule.py refuses malformed fields with a message naming them (issue 11's parser gaps)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronos.errors import InvalidSchedule
from cronos.schedule import parse_schedule

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("- * * * * *", "second field '-': a range needs a start and an end"),  # was an IndexError
        ("0 - 5 * * *", "minute field '-': a range needs a start and an end"),  # was every minute of hour 5
        ("- * * * *", "minute field '-'"),
        ("0 0 -5 * *", "a range needs a start and an end"),
        ("0 0 * * 1-", "a range needs a start and an end"),
        ("1--5 * * * *", "a range needs a start and an end"),
        ("1,,2 * * * *", "has an empty list item"),
        (",1 * * * *", "has an empty list item"),
        ("1, * * * *", "has an empty list item"),
        ("*/99999999999999999999 * * * *", "minute step 99999999999999999999 is larger than the field's range 0-59"),
        ("*/61 * * * *", "minute step 61 is larger than the field's range 0-59"),
        ("0 */25 * * *", "hour step 25 is larger"),
        ("0 0 */32 * *", "day-of-month step 32 is larger"),
        ("0 0 1 */13 *", "month step 13 is larger"),
        ("0 0 * * */9", "day-of-week step 9 is larger"),
        ("*/61 * * * * *", "second step 61 is larger"),
    ],
)
def test_malformed_fields_are_refused_naming_them(expression: str, says: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(expression)
    assert caught.value.field == "$.cron_expression"
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("expression", "first"),
    [
        ("*/60 * * * *", datetime(2026, 1, 1, 1, tzinfo=UTC)),  # a step as large as the range: once, at :00
        ("0 */24 * * *", datetime(2026, 1, 2, tzinfo=UTC)),
        ("0 0 */31 * *", datetime(2026, 2, 1, tzinfo=UTC)),
        ("0 0 * * */8", datetime(2026, 1, 4, tzinfo=UTC)),  # Sunday
        ("0 5-7/2 * * *", datetime(2026, 1, 1, 5, tzinfo=UTC)),
        ("0 0 * * FRI-MON", datetime(2026, 1, 2, tzinfo=UTC)),
    ],
)
def test_steps_up_to_the_range_are_accepted(expression: str, first: datetime) -> None:
    assert parse_schedule(expression).next_after(T0) == first
