"""Several schedules per job (cronos.schedule_union): one schedule object, the union of its parts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronos.errors import InvalidInput, InvalidSchedule
from cronos.rules import Calendar as RuleCalendar
from cronos.rules import CalendarRef, RuleBook
from cronos.schedule import parse_schedule
from cronos.schedule_union import ScheduleEntry, Union, any_hash, as_entries, check_entries, parse_text, text_of
from cronos.schedule_window import filtered, job_schedule
from cronos.ticks import Segment, plan

MONDAY = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday


def _times(expression: str, entries: list[ScheduleEntry], days: int = 7, zone: str = "UTC") -> list[datetime]:
    schedule, _notice = job_schedule(expression, zone, schedules=entries)
    return schedule.fire_times(MONDAY - timedelta(microseconds=1), MONDAY + timedelta(days=days))


def test_the_union_of_weekday_mornings_evenings_and_saturday_is_one_schedule() -> None:
    times = _times("0 8 * * 1-5", [ScheduleEntry(cron="0 17 * * 1-5"), ScheduleEntry(cron="0 10 * * 6")])
    assert len(times) == 11  # 5 mornings, 5 evenings, a Saturday
    assert times == sorted(times)
    assert datetime(2026, 3, 7, 10, tzinfo=UTC) in times
    assert datetime(2026, 3, 2, 17, tzinfo=UTC) in times


def test_an_instant_two_entries_share_fires_once() -> None:
    times = _times("0 * * * *", [ScheduleEntry(cron="0 */2 * * *"), ScheduleEntry(every="30m")], days=1)
    assert len(times) == len(set(times)) == 49  # every half hour of a day, both ends in, each once
    assert times.count(datetime(2026, 3, 2, 2, tzinfo=UTC)) == 1


def test_an_entry_has_its_own_zone_and_defaults_to_the_jobs() -> None:
    paris = _times("@never", [ScheduleEntry(cron="0 9 * * 1", timezone="Europe/Paris")])
    assert paris == [datetime(2026, 3, 2, 8, tzinfo=UTC)]  # 09:00 CET
    tokyo = _times("@never", [ScheduleEntry(cron="0 9 * * 1")], zone="Asia/Tokyo")
    assert tokyo == [datetime(2026, 3, 2, 0, tzinfo=UTC), datetime(2026, 3, 9, 0, tzinfo=UTC)]  # 09:00 JST


def test_without_entries_the_schedule_is_the_single_one() -> None:
    schedule, _notice = job_schedule("*/5 * * * *", "UTC")
    assert schedule.base is parse_schedule("*/5 * * * *")
    with_entries, _notice = job_schedule("*/5 * * * *", "UTC", schedules=[ScheduleEntry(every="7m")])
    assert isinstance(with_entries.base, Union)


def test_a_window_and_a_skip_calendar_apply_to_the_union() -> None:
    book = RuleBook.of([RuleCalendar(name="weekend", timezone="UTC", weekdays=["sat", "sun"])], [])
    rules = book.rules("job", "default", (CalendarRef(name="weekend"),))
    schedule, _notice = job_schedule(
        "0 8 * * *", "UTC", end_at=datetime(2026, 3, 7, 12, tzinfo=UTC), schedules=[ScheduleEntry(cron="0 20 * * *")]
    )
    held = filtered(schedule, rules)
    times = held.fire_times(MONDAY, MONDAY + timedelta(days=30))
    assert times[-1] == datetime(2026, 3, 7, 8, tzinfo=UTC)  # the window ends the union
    skipped = [t for t in times if (verdict := rules.verdict(t)) is not None and verdict.release_at is None]
    assert [t.weekday() for t in skipped] == [5]  # Saturday 08:00 (Saturday 20:00 is past end_at)


def test_a_part_whose_calendar_ends_leaves_the_others() -> None:
    union = Union((parse_schedule("@never"), parse_schedule("0 0 1 1 *")))
    assert union.next_after(datetime(2026, 6, 1, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)
    with pytest.raises(OverflowError):
        Union((parse_schedule("0 0 1 1 *"),)).next_after(datetime(9999, 6, 1, tzinfo=UTC))


def test_checks_name_the_entry_and_its_field() -> None:
    with pytest.raises(InvalidInput) as bad:
        check_entries([ScheduleEntry(cron="0 8 * * *", every="1h")], "UTC", "", parse_schedule)
    assert bad.value.field == "$.schedules[0]"
    with pytest.raises(InvalidSchedule) as cron:
        check_entries([ScheduleEntry(every="1h"), ScheduleEntry(cron="61 * * * *")], "UTC", "", parse_schedule)
    assert cron.value.field == "$.schedules[1].cron"
    with pytest.raises(InvalidSchedule) as zone:
        check_entries([ScheduleEntry(cron="0 8 * * *", timezone="Mars/Olympus")], "UTC", "", parse_schedule)
    assert zone.value.field == "$.schedules[0].timezone"
    with pytest.raises(InvalidInput) as interval_zone:
        check_entries([ScheduleEntry(every="1h", timezone="UTC")], "UTC", "", parse_schedule)
    assert interval_zone.value.field == "$.schedules[0].timezone"
    twice = check_entries([ScheduleEntry(every="60m"), ScheduleEntry(every="1h")], "UTC", "", parse_schedule)
    assert twice == [ScheduleEntry(every="1h")] * 2  # kept as given: the union has each instant once
    assert check_entries([ScheduleEntry(every="90m")], "UTC", "", parse_schedule) == [ScheduleEntry(every="1h30m")]


def test_an_h_in_an_entry_takes_the_jobs_name() -> None:
    assert any_hash("0 8 * * *", [ScheduleEntry(cron="H 9 * * *")])
    assert not any_hash("0 8 * * *", [ScheduleEntry(every="1h")])
    a = _times("@never", [ScheduleEntry(cron="H H * * *")])
    schedule, _notice = job_schedule("@never", "UTC", key="another", schedules=[ScheduleEntry(cron="H H * * *")])
    b = schedule.fire_times(MONDAY - timedelta(microseconds=1), MONDAY + timedelta(days=7))
    assert len(a) == len(b) == 7 and a != b


def test_the_command_line_text_reads_back() -> None:
    entries = parse_text("0 8 * * 1-5; TZ=Europe/Paris 0 10 * * 6;every 90m from 2026-01-01T00:00:00Z")
    assert entries == [
        ScheduleEntry(cron="0 8 * * 1-5"),
        ScheduleEntry(cron="0 10 * * 6", timezone="Europe/Paris"),
        ScheduleEntry(every="1h30m", anchor=datetime(2026, 1, 1, tzinfo=UTC)),
    ]
    assert parse_text(text_of(entries)) == entries
    assert parse_text("") == []
    with pytest.raises(InvalidInput):
        parse_text("every often")
    with pytest.raises(InvalidInput):
        parse_text("every 1h from yesterday")


def test_tick_accounting_plans_the_union_of_a_revision() -> None:
    seg = Segment(start=None, end=None, revision=1, status="active", cron_expression="0 8 * * *", timezone="UTC",
                  schedules=as_entries([{"cron": "0 8,20 * * *"}]))  # fmt: skip
    ticks = [t for t, _seg in plan([seg], MONDAY, MONDAY + timedelta(days=1), 100)]
    assert ticks == [datetime(2026, 3, 2, 8, tzinfo=UTC), datetime(2026, 3, 2, 20, tzinfo=UTC)]
