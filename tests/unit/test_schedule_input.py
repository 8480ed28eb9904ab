"""Regressions: one case per parser bug of issues 11 and 12, and the forms issue 12 decided."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronos.errors import InvalidSchedule
from cronos.schedule import parse_schedule
from cronos.schedule_legacy import parse_legacy, stored_schedule

T0 = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday


def first(expression: str, count: int = 4, timezone: str = "UTC") -> list[str]:
    times = parse_schedule(expression, timezone).fire_times(T0, datetime(2100, 1, 1, tzinfo=UTC), limit=count)
    return [t.strftime("%Y-%m-%d %a %H:%M:%S") for t in times]


def refused(expression: str, timezone: str = "UTC") -> InvalidSchedule:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(expression, timezone)
    return caught.value


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("- * * * * *", "second field '-': a range needs a start and an end"),  # was an IndexError (500)
        ("0 - 5 * * *", "minute field '-': a range needs a start and an end"),  # was every minute of hour 5
        ("- * * * *", "minute field '-'"),
        ("0 0 -5 * *", "a range needs a start and an end"),
        ("0 0 * * 1-", "a range needs a start and an end"),
        ("1--5 * * * *", "is not valid"),
        ("1,,2 * * * *", "has an empty list item"),
        (",1 * * * *", "has an empty list item"),
        ("0 0 1,,L * *", "has an empty list item"),
        ("*/99999999999999999999 * * * *", "minute step 99999999999999999999 is too large (at most 999)"),
        ("*/0 * * * *", "minute step '0' must be a positive integer"),
        ("? * * * *", "? stands alone, in the day fields only"),
        ("0 0 1,? * *", "? stands alone"),
        ("0 0 * * L", "L alone is ambiguous"),
        ("0 0 * * 5L", "Quartz's dL is not supported (its day numbers differ); write L5"),
        ("0 0 * * 1#6", "the n of d#n must be 1-5"),
        ("0 0 32W * *", "day-of-month value 32 out of range 1-31"),
    ],
)
def test_malformed_fields_are_refused_naming_them(expression: str, says: str) -> None:
    error = refused(expression)
    assert error.field == "$.cron_expression"
    assert says in error.message


@pytest.mark.parametrize("separator", ["\u00a0", "\u3000", "\u2003", "\n", "\r", "\x0b", "\x0c"])
def test_only_ascii_space_and_tab_separate_fields(separator: str) -> None:
    assert "is not allowed; fields are separated by ASCII spaces or tabs" in refused(f"0{separator}0 * * *").message
    assert first("0\t0 \t * * *", 1) == ["2026-01-02 Fri 00:00:00"]


def test_equal_ranges_with_leading_zeros_are_one_value() -> None:
    assert first("05-5 * * * *", 2) == ["2026-01-01 Thu 00:05:00", "2026-01-01 Thu 01:05:00"]
    assert first("0 08-8 * * *", 2) == ["2026-01-01 Thu 08:00:00", "2026-01-02 Fri 08:00:00"]
    assert first("0 0 * * SUN-0", 1) == ["2026-01-04 Sun 00:00:00"]


def test_numeric_backwards_ranges_are_refused_with_the_forward_spelling() -> None:
    error = refused("50-10/7 * * * *")
    assert "minute range '50-10/7' runs backwards (Vixie cron refuses it); write 50-59/7,4-10/7" in error.message
    assert first("50-59/7,4-10/7 * * * *", 3) == [  # what cron's step means across the wrap: 50, 57, 4
        "2026-01-01 Thu 00:04:00",
        "2026-01-01 Thu 00:50:00",
        "2026-01-01 Thu 00:57:00",
    ]
    assert "write 22-23,0-2" in refused("0 22-2 * * *").message
    assert "write 5-6,0-1" in refused("0 0 * * 5-1").message


@pytest.mark.parametrize("expression", ["0 0 * * 7-0", "0 0 * * 7-SUN", "0 0 * * 7-3"])
def test_seven_to_anything_is_refused_not_every_day(expression: str) -> None:
    assert "runs backwards; write 0" in refused(expression).message


def test_named_ranges_wrap_and_the_step_runs_on_across_the_wrap() -> None:
    assert [d[5:10] for d in first("0 0 1 NOV-MAR/3 *", 3)] == ["02-01", "11-01", "02-01"]  # Nov, Feb
    assert [d[11:14] for d in first("0 0 * * FRI-MON", 4)] == ["Fri", "Sat", "Sun", "Mon"]
    assert [d[11:14] for d in first("0 0 * * sat-sun", 2)] == ["Sat", "Sun"]


def test_a_step_past_the_range_keeps_the_first_value() -> None:
    assert first("*/61 * * * *", 2) == ["2026-01-01 Thu 01:00:00", "2026-01-01 Thu 02:00:00"]
    assert first("0 0 * * */8", 1) == ["2026-01-04 Sun 00:00:00"]
    assert first("10-20/30 * * * *", 1) == ["2026-01-01 Thu 00:10:00"]


def test_day_fields_and_or_by_the_first_character() -> None:
    # "*" first: AND (odd days that are Mondays); written out: OR (every day).
    assert first("0 0 */2 * 1", 3) == ["2026-01-05 Mon 00:00:00", "2026-01-19 Mon 00:00:00", "2026-02-09 Mon 00:00:00"]
    assert first("0 0 1-31 * 1", 2) == ["2026-01-02 Fri 00:00:00", "2026-01-03 Sat 00:00:00"]
    assert first("0 0 ? * 1", 1) == ["2026-01-05 Mon 00:00:00"]


def test_extensions_with_a_restricted_other_day_field_are_ored() -> None:
    # Both day fields restricted: the 1st OR the second Monday / last Friday (were "never fires").
    assert first("0 0 1 * 1#2", 3) == ["2026-01-12 Mon 00:00:00", "2026-02-01 Sun 00:00:00", "2026-02-09 Mon 00:00:00"]
    assert first("0 0 1 * L5", 3) == ["2026-01-30 Fri 00:00:00", "2026-02-01 Sun 00:00:00", "2026-02-27 Fri 00:00:00"]
    assert first("0 0 15W * 1", 2) == ["2026-01-05 Mon 00:00:00", "2026-01-12 Mon 00:00:00"]
    # "*" first in the other field: AND.
    assert first("0 0 */2 * 1#2", 2) == ["2026-02-09 Mon 00:00:00", "2026-03-09 Mon 00:00:00"]
    assert first("0 0 L * *", 2) == ["2026-01-31 Sat 00:00:00", "2026-02-28 Sat 00:00:00"]
    assert first("0 0 LW * *", 2) == ["2026-01-30 Fri 00:00:00", "2026-02-27 Fri 00:00:00"]
    assert first("0 0 1W * *", 2) == ["2026-02-02 Mon 00:00:00", "2026-03-02 Mon 00:00:00"]  # Feb 1, Mar 1: Sundays
    assert first("0 0 31W 5 *", 1) == ["2026-05-29 Fri 00:00:00"]  # the 31st is a Sunday: back to Friday


def test_never_firing_dates_are_refused() -> None:
    assert "never fires" in refused("0 0 30 2 *").message
    assert "never fires" in refused("0 0 31 4,6 *").message
    assert first("0 0 29 2 *", 1) == ["2028-02-29 Tue 00:00:00"]


@pytest.mark.parametrize("zone", ["right/UTC", "posix/Europe/Berlin", "posixrules", "localtime", "Europe/berlin"])
def test_zones_are_tzdata_names_only(zone: str) -> None:
    error = refused("* * * * *", zone)
    assert error.field == "$.timezone"
    assert "the tzdata package" in error.message


def test_tzdata_links_are_accepted() -> None:
    assert first("0 9 * * *", 1, "US/Pacific") == ["2026-01-01 Thu 17:00:00"]


def test_a_stored_expression_refused_now_keeps_its_old_meaning_with_a_notice() -> None:
    schedule, notice = stored_schedule("50-10/7 * * * *", "UTC")
    assert notice is not None and "write 50-59/7,4-10/7" in notice and "until its schedule is edited" in notice
    assert schedule is parse_legacy("50-10/7 * * * *", "UTC")
    # the legacy meaning, off by one: 50, 57, 5
    assert [t.minute for t in schedule.fire_times(T0, T0.replace(hour=1))] == [5, 50, 57]
    zone_schedule, zone_notice = stored_schedule("0 9 * * *", "right/UTC")
    assert zone_notice is not None and "$.timezone" in zone_notice
    assert zone_schedule.next_after(T0) == datetime(2026, 1, 1, 9, tzinfo=UTC)
    assert stored_schedule("*/5 * * * *", "UTC") == (parse_schedule("*/5 * * * *"), None)
    with pytest.raises(InvalidSchedule):
        stored_schedule("not a cron", "UTC")
