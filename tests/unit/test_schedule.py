"""Tests for cronos.schedule: syntax, validation and DST rules by example.

The property tests against a brute-force Vixie cron are in test_schedule_vixie.py; the
regressions of issue 12 (and 11's parser gaps) in test_schedule_input.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from cronos.errors import InvalidSchedule
from cronos.schedule import NEVER_AT, Schedule, parse_schedule, upcoming


def utc(text: str) -> datetime:
    """'2026-03-29 01:00' or '...:30' read as UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(expression: str, timezone: str, after: str, until: str) -> str:
    """Fire times in (after, until] as 'day/HH:MM' UTC, space-separated."""
    times = parse_schedule(expression, timezone).fire_times(utc(after), utc(until))
    assert all(t.second == 0 for t in times)
    return " ".join(t.strftime("%d/%H:%M") for t in times)


def nexts(expression: str, after: str, count: int = 3, timezone: str = "UTC") -> list[str]:
    schedule, current, out = parse_schedule(expression, timezone), utc(after), []
    for _ in range(count):
        current = schedule.next_after(current)
        out.append(current.strftime("%Y-%m-%d %H:%M:%S"))
    return out


# -- syntax ---------------------------------------------------------------------------

# 2026-01-02 is a Friday.
SYNTAX = [
    ("*/15 * * * *", "2026-01-02 00:07", ["2026-01-02 00:15:00", "2026-01-02 00:30:00", "2026-01-02 00:45:00"]),
    ("0 9 * * MON-FRI", "2026-01-02 10:00", ["2026-01-05 09:00:00", "2026-01-06 09:00:00", "2026-01-07 09:00:00"]),
    ("0 0 1 jan *", "2026-01-02 00:00", ["2027-01-01 00:00:00", "2028-01-01 00:00:00", "2029-01-01 00:00:00"]),
    ("0 0 13 * 5", "2026-02-01 00:00", ["2026-02-06 00:00:00", "2026-02-13 00:00:00", "2026-02-20 00:00:00"]),
    ("0 0 L 2 *", "2027-01-01 00:00", ["2027-02-28 00:00:00", "2028-02-29 00:00:00", "2029-02-28 00:00:00"]),
    ("0 0 * * 7", "2026-01-02 00:00", ["2026-01-04 00:00:00", "2026-01-11 00:00:00", "2026-01-18 00:00:00"]),
    ("  5 4 * * *  ", "2026-01-02 04:05", ["2026-01-03 04:05:00", "2026-01-04 04:05:00", "2026-01-05 04:05:00"]),
    ("5-5 * * * *", "2026-01-02 00:00", ["2026-01-02 00:05:00", "2026-01-02 01:05:00", "2026-01-02 02:05:00"]),
    ("0 0 * * FRI-MON", "2026-01-04 12:00", ["2026-01-05 00:00:00", "2026-01-09 00:00:00", "2026-01-10 00:00:00"]),
    # Vixie: a day field starting with "*" ANDs the two; written out in full it ORs them
    ("0 0 1 * */1", "2026-01-02 00:00", ["2026-02-01 00:00:00", "2026-03-01 00:00:00", "2026-04-01 00:00:00"]),
    ("0 0 1-31 * MON", "2026-01-02 00:00", ["2026-01-03 00:00:00", "2026-01-04 00:00:00", "2026-01-05 00:00:00"]),
    # 6 fields, seconds first
    ("*/5 * * * * *", "2026-01-02 00:00", ["2026-01-02 00:00:05", "2026-01-02 00:00:10", "2026-01-02 00:00:15"]),
    ("30 * * * * *", "2026-01-02 00:00", ["2026-01-02 00:00:30", "2026-01-02 00:01:30", "2026-01-02 00:02:30"]),
    ("0 30 9 * * 1-5", "2026-01-02 12:00", ["2026-01-05 09:30:00", "2026-01-06 09:30:00", "2026-01-07 09:30:00"]),
    ("15,45 0 0 1 * *", "2026-01-01 00:00:20", ["2026-01-01 00:00:45", "2026-02-01 00:00:15", "2026-02-01 00:00:45"]),
    # macros
    ("@yearly", "2026-06-01 00:00", ["2027-01-01 00:00:00", "2028-01-01 00:00:00", "2029-01-01 00:00:00"]),
    ("@annually", "2026-06-01 00:00", ["2027-01-01 00:00:00", "2028-01-01 00:00:00", "2029-01-01 00:00:00"]),
    ("@monthly", "2026-01-02 00:00", ["2026-02-01 00:00:00", "2026-03-01 00:00:00", "2026-04-01 00:00:00"]),
    ("@weekly", "2026-01-02 00:00", ["2026-01-04 00:00:00", "2026-01-11 00:00:00", "2026-01-18 00:00:00"]),
    ("@daily", "2026-01-02 00:00", ["2026-01-03 00:00:00", "2026-01-04 00:00:00", "2026-01-05 00:00:00"]),
    ("@midnight", "2026-01-02 00:00", ["2026-01-03 00:00:00", "2026-01-04 00:00:00", "2026-01-05 00:00:00"]),
    ("@HOURLY", "2026-01-02 00:00", ["2026-01-02 01:00:00", "2026-01-02 02:00:00", "2026-01-02 03:00:00"]),
]


@pytest.mark.parametrize(("expression", "after", "expected"), SYNTAX)
def test_syntax(expression: str, after: str, expected: list[str]) -> None:
    assert nexts(expression, after) == expected


def test_strictly_after_and_sub_second_inputs() -> None:
    schedule = parse_schedule("0 30 9 * * *")
    at = utc("2026-01-02 09:30:00")
    assert schedule.next_after(at) == utc("2026-01-03 09:30:00")
    assert schedule.next_after(at - timedelta(microseconds=1)) == at
    assert schedule.next_after(at + timedelta(microseconds=1)) == utc("2026-01-03 09:30:00")
    assert parse_schedule("30 9 * * *").next_after(at - timedelta(microseconds=1)) == at


def test_result_is_utc_for_any_input_zone() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    got = parse_schedule("0 9 * * *", "Asia/Tokyo").next_after(datetime(2026, 1, 2, 8, 0, tzinfo=tokyo))
    assert got == utc("2026-01-02 00:00") and got.tzinfo is UTC


def test_fields_and_cache() -> None:
    five, six = parse_schedule(" */5 * * * * "), parse_schedule("*/5 * * * * *", "Europe/Berlin")
    assert (five.expression, five.timezone, five.has_seconds) == ("*/5 * * * *", "UTC", False)
    assert (six.timezone, six.has_seconds) == ("Europe/Berlin", True)
    assert parse_schedule("@daily").has_seconds is False
    assert parse_schedule("*/5 * * * * *", "Europe/Berlin") is six
    twin = Schedule("*/5 * * * * *", "Europe/Berlin", True)
    assert six == twin and hash(six) == hash(twin) and six != five


def test_fire_times_bounds_and_limit() -> None:
    schedule = parse_schedule("0 * * * *")
    assert [t.hour for t in schedule.fire_times(utc("2026-01-02 00:00"), utc("2026-01-02 03:00"))] == [1, 2, 3]
    assert len(schedule.fire_times(utc("2026-01-02 00:00"), utc("2026-01-03 00:00"), limit=2)) == 2
    assert schedule.fire_times(utc("2026-01-02 00:00"), utc("2026-01-02 00:00")) == []
    assert schedule.fire_times(utc("2026-01-02 00:00"), utc("2026-01-03 00:00"), limit=0) == []


def test_misuse_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_schedule("* * * * *").next_after(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="has_seconds"):
        Schedule("*/5 * * * * *", "UTC", False)


# -- validation -----------------------------------------------------------------------

EXPR, TZ = "$.cron_expression", "$.timezone"
INVALID = [
    ("", "UTC", EXPR, "expression is empty"),
    ("   ", "UTC", EXPR, "expression is empty"),
    ("* * * *", "UTC", EXPR, "expected 5 or 6 fields, got 4"),
    ("0 0 0 1 1 * 2026", "UTC", EXPR, "expected 5 or 6 fields, got 7"),
    ("@reboot", "UTC", EXPR, "'@reboot' has no fire time"),
    ("@every 5m", "UTC", EXPR, "'@every 5m' is not a macro"),
    ("not a cron at all", "UTC", EXPR, "minute field 'not' is not valid"),
    ("61 * * * *", "UTC", EXPR, "minute value 61 out of range 0-59"),
    ("0 24 * * *", "UTC", EXPR, "hour value 24 out of range 0-23"),
    ("0 0 0 * *", "UTC", EXPR, "day-of-month value 0 out of range 1-31"),
    ("0 0 * 13 *", "UTC", EXPR, "month value 13 out of range 1-12"),
    ("0 0 * * 8", "UTC", EXPR, "day-of-week value 8 out of range 0-7"),
    ("60 * * * * *", "UTC", EXPR, "second value 60 out of range 0-59"),
    ("0 10-70 * * * *", "UTC", EXPR, "minute value 70 out of range 0-59"),
    ("*/0 * * * *", "UTC", EXPR, "minute step '0' must be a positive integer"),
    ("0 */x * * *", "UTC", EXPR, "hour step 'x' must be a positive integer"),
    ("H * * * *", "UTC", EXPR, "minute field 'H': H is a job's, hashed from its name"),  # job_schedule resolves it
    ("0 0 * * R", "UTC", EXPR, "day-of-week field 'R': R (random) is not supported, jitter_s is"),
    ("foo * * * *", "UTC", EXPR, "minute field 'foo' is not valid"),
    ("0 0 * * FUNDAY", "UTC", EXPR, "day-of-week field 'FUNDAY' is not valid"),
    ("0 0 * JANUARY *", "UTC", EXPR, "month field 'JANUARY' is not valid"),
    ("0 0 30 2 *", "UTC", EXPR, "never fires"),
    ("x" * 300, "UTC", EXPR, "longer than 256"),
    ("* * * * *", "Mars/Base", TZ, "unknown time zone 'Mars/Base'"),
    ("* * * * *", "", TZ, "unknown time zone ''"),
    ("* * * * *", "europe/berlin", TZ, "unknown time zone 'europe/berlin'"),
    ("* * * * *", "../etc/passwd", TZ, "unknown time zone"),
    ("* * * * *", "Europe", TZ, "unknown time zone 'Europe'"),
    ("* * * * *", "localtime", TZ, "unknown time zone 'localtime'"),
]


@pytest.mark.parametrize(("expression", "timezone", "field", "message"), INVALID)
def test_invalid(expression: str, timezone: str, field: str, message: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(expression, timezone)
    assert caught.value.field == field
    assert message in caught.value.message


def test_non_string_inputs_are_invalid() -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(5)
    assert caught.value.field == EXPR
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule("* * * * *", 5)
    assert caught.value.field == TZ


# -- DST --------------------------------------------------------------------------------

# Berlin: 2026-03-29 02:00 CET -> 03:00 CEST at 01:00Z; 2026-10-25 03:00 CEST -> 02:00 CET at 01:00Z.
# New York: 2026-03-08 02:00 EST -> 03:00 EDT at 07:00Z; 2026-11-01 02:00 EDT -> 01:00 EST at 06:00Z.
DST = [
    # "day/HH:MM" UTC.
    # Wall-clock jobs: a skipped time fires once when the gap ends; a repeated time fires once, first.
    ("30 2 * * *", "Europe/Berlin", "2026-03-28", "2026-03-31", "28/01:30 29/01:00 30/00:30"),
    ("30 2 * * *", "Europe/Berlin", "2026-10-24", "2026-10-27", "24/00:30 25/00:30 26/01:30"),
    ("0,30 2 * * *", "Europe/Berlin", "2026-03-29", "2026-03-29 12:00", "29/01:00"),
    ("20,40 2 * * *", "Europe/Berlin", "2026-10-24 23:00", "2026-10-25 12:00", "25/00:20 25/00:40"),
    ("30 2 * * *", "America/New_York", "2026-03-07", "2026-03-10", "07/07:30 08/07:00 09/06:30"),
    ("30 2 * * *", "America/New_York", "2026-10-31", "2026-11-03", "31/06:30 01/07:30 02/07:30"),
    ("30 1 * * *", "America/New_York", "2026-10-31", "2026-11-03", "31/05:30 01/05:30 02/06:30"),
    ("0 0 * * *", "America/Santiago", "2026-09-05", "2026-09-08", "05/04:00 06/04:00 07/03:00"),
    ("0 2 * * *", "Australia/Lord_Howe", "2026-10-02", "2026-10-05", "02/15:30 03/15:30 04/15:00"),
    # Every-hour jobs: real cadence; both passes of a repeated hour fire, gap times do not exist.
    ("0 * * * *", "Europe/Berlin", "2026-03-28 23:00", "2026-03-29 03:00", "29/00:00 29/01:00 29/02:00 29/03:00"),
    ("30 * * * *", "Europe/Berlin", "2026-03-29 00:00", "2026-03-29 03:00", "29/00:30 29/01:30 29/02:30"),
    ("*/30 * * * *", "Europe/Berlin", "2026-03-29 00:00", "2026-03-29 02:00", "29/00:30 29/01:00 29/01:30 29/02:00"),
    ("0 * * * *", "Europe/Berlin", "2026-10-24 23:30", "2026-10-25 03:00", "25/00:00 25/01:00 25/02:00 25/03:00"),
    ("*/30 * * * *", "Europe/Berlin", "2026-10-24 23:45", "2026-10-25 01:30", "25/00:00 25/00:30 25/01:00 25/01:30"),
    ("0 * * * *", "America/New_York", "2026-03-08 05:30", "2026-03-08 09:00", "08/06:00 08/07:00 08/08:00 08/09:00"),
    ("*/30 * * * *", "America/New_York", "2026-03-08 06:15", "2026-03-08 08:00", "08/06:30 08/07:00 08/07:30 08/08:00"),
    ("0 * * * *", "America/New_York", "2026-11-01 04:30", "2026-11-01 08:00", "01/05:00 01/06:00 01/07:00 01/08:00"),
    ("*/30 * * * *", "America/New_York", "2026-11-01 05:15", "2026-11-01 07:00", "01/05:30 01/06:00 01/06:30 01/07:00"),
    ("0 * * * * *", "Europe/Berlin", "2026-03-29 00:58", "2026-03-29 01:01", "29/00:59 29/01:00 29/01:01"),
    # Wildcard by the first character (issue 12), not by covering every hour:
    # "*/15 1" follows real time, so both passes of New York's repeated 01:xx fire ...
    (
        "*/15 1 * * *",
        "America/New_York",
        "2026-11-01 05:00",
        "2026-11-01 07:00",
        "01/05:15 01/05:30 01/05:45 01/06:00 01/06:15 01/06:30 01/06:45",
    ),
    (
        "*/20 2 * * *",
        "Europe/Berlin",
        "2026-10-24 23:00",
        "2026-10-25 12:00",
        "25/00:00 25/00:20 25/00:40 25/01:00 25/01:20 25/01:40",
    ),
    # ... "0 */2" adds nothing at the end of Berlin's spring gap (02:00 never happens) ...
    ("0 */2 * * *", "Europe/Berlin", "2026-03-28 22:00", "2026-03-29 03:00", "28/23:00 29/02:00"),
    # ... while "30 0-23" is fixed-time: 02:30 skipped fires as the gap ends; in autumn, once.
    ("30 0-23 * * *", "Europe/Berlin", "2026-03-28 23:00", "2026-03-29 02:00", "28/23:30 29/00:30 29/01:00 29/01:30"),
    ("30 0-23 * * *", "Europe/Berlin", "2026-10-24 23:00", "2026-10-25 03:00", "24/23:30 25/00:30 25/02:30"),
    # Lord Howe (30-minute DST: 02:00 -> 02:30) and Chatham (+12:45 / +13:45, 02:45 -> 03:45)
    ("15 2 * * *", "Australia/Lord_Howe", "2026-10-03 12:00", "2026-10-04 12:00", "03/15:30"),
    ("*/15 2 * * *", "Australia/Lord_Howe", "2026-10-03 15:00", "2026-10-03 16:30", "03/15:30 03/15:45"),
    ("0 3 * * *", "Pacific/Chatham", "2026-09-26 12:00", "2026-09-27 12:00", "26/14:00"),
    ("0 3 * * *", "Pacific/Chatham", "2026-04-04 12:00", "2026-04-05 12:00", "04/13:15"),
    ("* 3 * * *", "Pacific/Chatham", "2026-04-04 14:13", "2026-04-04 14:16", "04/14:15 04/14:16"),  # 2nd pass
]


@pytest.mark.parametrize(("expression", "timezone", "after", "until", "expected"), DST)
def test_dst(expression: str, timezone: str, after: str, until: str, expected: str) -> None:
    assert fires(expression, timezone, after, until) == expected


def test_dst_next_after_from_inside_the_repeated_hour() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    second_pass = datetime(2026, 10, 25, 2, 15, fold=1, tzinfo=berlin)  # 01:15Z
    first_pass = datetime(2026, 10, 25, 2, 45, fold=0, tzinfo=berlin)  # 00:45Z
    assert parse_schedule("30 2 * * *", "Europe/Berlin").next_after(second_pass) == utc("2026-10-26 01:30")
    assert parse_schedule("30 2 * * *", "Europe/Berlin").next_after(first_pass) == utc("2026-10-26 01:30")
    assert parse_schedule("0 * * * *", "Europe/Berlin").next_after(first_pass) == utc("2026-10-25 01:00")
    assert parse_schedule("30 * * * *", "Europe/Berlin").next_after(second_pass) == utc("2026-10-25 01:30")


def test_the_end_of_the_calendar_is_an_overflow_in_every_zone() -> None:
    last = datetime(9999, 12, 31, 23, 59, 30, tzinfo=UTC)
    for zone in ("UTC", "Europe/Berlin", "America/New_York"):
        for expression in ("* * * * *", "0 0 29 2 *"):
            with pytest.raises(OverflowError):
                parse_schedule(expression, zone).next_after(last)


@pytest.mark.parametrize("expression", ["@never", "@NEVER", " @never\t"])
@pytest.mark.parametrize("timezone", ["UTC", "Europe/Paris", "Pacific/Kiritimati"])
def test_never_has_no_fire_time(expression: str, timezone: str) -> None:
    """`@never` (a job run by hand or after its parents): no fire time in any window, no next run."""
    schedule = parse_schedule(expression, timezone)
    assert schedule.never and not parse_schedule("@yearly", timezone).never
    assert schedule.fire_times(utc("2026-01-01 00:00"), utc("2030-01-01 00:00")) == []
    assert upcoming(schedule.next_after, utc("2026-12-31 23:59")) is None
    assert schedule.next_after(utc("2026-01-01 00:00")) == NEVER_AT
    with pytest.raises(OverflowError):
        schedule.next_after(NEVER_AT)
    assert upcoming(parse_schedule("@yearly", timezone).next_after, utc("2026-06-01 00:00")) is not None
