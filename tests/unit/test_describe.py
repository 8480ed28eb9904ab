"""Plain words for cron expressions (api.describe): the common forms, and the generic fallback."""

from __future__ import annotations

import pytest

from api.describe import describe
from cronos.schedule import parse_schedule


def _valid(expression: str) -> None:
    """The cases are expressions the scheduler accepts (L, W and # as their extension allows)."""
    if not any(mark in expression.upper() for mark in ("L", "W", "#")):
        parse_schedule(expression)


# The common forms, in plain words.
COMMON = [
    ("*/5 * * * *", "every 5 minutes"),
    ("30 2 * * 1", "at 02:30 on Monday"),
    ("* * * * *", "every minute"),
    ("@hourly", "every hour"),
    ("@daily", "at 00:00 every day"),
    ("@weekly", "at 00:00 on Sunday"),
    ("@monthly", "at 00:00 on day 1 of the month"),
    ("@YEARLY", "at 00:00 on January 1"),
    ("@midnight", "at 00:00 every day"),
    ("@never", "never on its own (by hand, or after its parent jobs)"),
    ("*/10 * * * * *", "every 10 seconds"),
    ("0/15 * * * *", "every 15 minutes"),  # n/step (issue 40): the range it stands for
    ("5/10 * * * *", "at minute 5-59/10"),
    ("0 0 1/2 * 1", "at 00:00 on day-of-month 1-31/2 or Monday"),  # not */2: that would AND
    ("* * * * * *", "every second"),
    ("30 * * * * *", "every minute at second 30"),
    ("0 30 9 * * 1-5", "at 09:30 on Monday through Friday"),
    ("0 9-17 * * MON-FRI", "every hour from 09:00 to 17:00 on Monday through Friday"),
    ("*/15 9-17 * * *", "every 15 minutes from 09:00 to 17:59"),
    ("0 0,12 * * *", "at 00:00 and 12:00 every day"),
    ("0 0 1,15 * *", "at 00:00 on days 1 and 15 of the month"),
    ("0 0 1-7 * *", "at 00:00 on days 1 through 7 of the month"),
    ("0 0 L * *", "at 00:00 on the last day of the month"),
    ("0 12 * * 5L", "at 12:00 on the last Friday of the month"),
    ("0 12 * * 1#2", "at 12:00 on the second Monday of the month"),
    ("0 */2 * * *", "every 2 hours"),
    ("15 */6 * * *", "every 6 hours at minute 15"),
    ("5 4 * * sun,7", "at 04:05 on Sunday and Sunday"),
    ("5 0 * 8 *", "at 00:05 every day in August"),
    ("0 0 1 jan-mar *", "at 00:00 on day 1 of the month from January through March"),
    ("  15 3 * * 1,3,5  ", "at 03:15 on Monday, Wednesday and Friday"),
]
# Other forms fall back to the fields.
FALLBACK = [
    ("1-10/3 9 * * *", "at minute 1-10/3, hour 9"),
    ("5 */3 * * * *", "at second 5, minute */3"),
    ("0 0 15W * *", "at 00:00 on day-of-month 15W"),
    ("0 0 * 1-12/2 *", "at 00:00 every day in month 1-12/2"),
]


@pytest.mark.parametrize(("expression", "words"), COMMON + FALLBACK)
def test_forms_read_as_words(expression: str, words: str) -> None:
    _valid(expression)
    assert describe(expression) == words


def test_both_day_fields_restricted_read_as_cron_does() -> None:
    # Vixie cron: either day matches, unless a day field starts with `*` (then both must).
    assert describe("0 0 13 * 5") == "at 00:00 on day 13 of the month or Friday"
    assert describe("0 0 */2 * 1") == "at 00:00 on day-of-month */2 and Monday"
