"""Calendars and blackouts (cronos.rules) as a pure filter over a job's schedule, and the leader's
planner applying it (dispatcher.planner through the schedule book): property tests and cases."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from cronos.models import SKIP_MISFIRED, DispatchJob
from cronos.rules import (
    Blackout,
    Calendar,
    CalendarRef,
    DateRange,
    RuleBook,
    Rules,
    Selector,
    Window,
)
from cronos.schedule import parse_schedule
from cronos.schedule_window import Filtered, Windowed, filtered, job_schedule
from dispatcher.planner import TickBatch
from dispatcher.schedule_book import ScheduleBook
from tests.unit.test_planner import _job
from tests.unit.test_schedule_window import _rounds

T0 = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)  # a Monday
WEEKDAYS = Calendar(name="weekdays", weekdays=["mon", "tue", "wed", "thu", "fri"])
HOLIDAYS = Calendar(
    name="holidays", dates=[date(2026, 1, 6)], ranges=[DateRange(start=date(2026, 1, 8), end=date(2026, 1, 9))]
)


def _blackout(name: str, action: str = "skip", **kw: object) -> Blackout:
    return Blackout(id=kw.pop("id", 1), name=name, action=action, **kw)  # type: ignore[arg-type]


def _ticks(book: ScheduleBook, start: datetime, end: datetime) -> list[tuple[datetime, datetime, str | None]]:
    """(tick, due_at, skip reason) of every row the leader writes from `start` to `end`."""
    batches: list[TickBatch] = _rounds(book, start, end)
    return [(s, d, r) for b in batches for s, d, r in zip(b.scheduled_for, b.due_at, b.skip_reason, strict=True)]


# --- the pure filter -------------------------------------------------------------------------


def test_weekdays_except_holidays_in_the_calendar_time_zone() -> None:
    rules = Rules(((WEEKDAYS, "allow"), (HOLIDAYS, "exclude")))
    days = [T0 + timedelta(days=n, hours=9) for n in range(7)]  # Mon 5 .. Sun 11 Jan
    assert [None if (v := rules.verdict(t)) is None else v.reason for t in days] == [
        None, "calendar:holidays", None, "calendar:holidays", "calendar:holidays", "calendar:weekdays",
        "calendar:weekdays",
    ]  # fmt: skip
    # The day is the calendar's: 23:30 UTC on Monday is already Tuesday 6 Jan in Berlin.
    berlin = Rules(((Calendar(name="hb", timezone="Europe/Berlin", dates=[date(2026, 1, 6)]), "exclude"),))
    assert berlin.verdict(T0 + timedelta(hours=23, minutes=30)) is not None
    assert berlin.verdict(T0 + timedelta(hours=22, minutes=30)) is None


def test_recurring_and_one_off_windows_hold_their_start_not_their_end() -> None:
    sunday = Window.of(_blackout("maint", cron_expression="0 2 * * 0", duration_s=7200, timezone="UTC"))
    start = datetime(2026, 1, 11, 2, 0, tzinfo=UTC)
    assert sunday.end_at(start) == start + timedelta(hours=2)
    assert sunday.end_at(start + timedelta(hours=1, minutes=59)) == start + timedelta(hours=2)
    assert sunday.end_at(start + timedelta(hours=2)) is None
    assert sunday.end_at(start - timedelta(seconds=1)) is None
    once = Window.of(_blackout("once", starts_at=start, ends_at=start + timedelta(minutes=5)))
    assert once.end_at(start) == start + timedelta(minutes=5) and once.end_at(start + timedelta(minutes=5)) is None


def test_touching_defer_windows_release_at_the_end_of_the_last() -> None:
    a = _blackout("a", "defer", id=1, starts_at=T0, ends_at=T0 + timedelta(hours=1))
    b = _blackout("b", "defer", id=2, starts_at=T0 + timedelta(hours=1), ends_at=T0 + timedelta(hours=2))
    verdict = RuleBook.of([], [a, b]).rules("job", "default", []).verdict(T0 + timedelta(minutes=10))
    assert verdict is not None and verdict.reason == "blackout:a" and verdict.release_at == T0 + timedelta(hours=2)


def test_selectors_pick_jobs_by_name_and_queue() -> None:
    book = RuleBook.of(
        [HOLIDAYS],
        [
            _blackout("all", id=1, starts_at=T0, ends_at=T0 + timedelta(hours=1)),
            _blackout("etl", id=2, starts_at=T0, ends_at=T0 + timedelta(hours=1), selector=Selector(jobs=["etl"])),
            _blackout("q", id=3, starts_at=T0, ends_at=T0 + timedelta(hours=1), selector=Selector(queues=["gpu"])),
        ],
    )
    names = lambda rules: [w.blackout.name for w in rules.windows]  # noqa: E731
    assert names(book.rules("etl", "default", [])) == ["all", "etl"]
    assert names(book.rules("other", "gpu", [])) == ["all", "q"]
    assert not RuleBook.of([HOLIDAYS], []).rules("x", "default", [])  # no rules: the plain schedule
    assert book.rules("x", "default", [CalendarRef(name="holidays")]).calendars == ((HOLIDAYS, "exclude"),)


_instants = st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2028, 1, 1), timezones=st.just(UTC))
_calendars = st.builds(
    Calendar,
    name=st.just("c"),
    timezone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]),
    dates=st.lists(st.dates(min_value=date(2025, 1, 1), max_value=date(2028, 1, 1)), max_size=5),
    weekdays=st.lists(st.sampled_from(["mon", "tue", "wed", "thu", "fri", "sat", "sun"]), max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(calendar=_calendars, instant=_instants)
def test_allow_and_exclude_are_complements(calendar: Calendar, instant: datetime) -> None:
    excluded = Rules(((calendar, "exclude"),)).verdict(instant)
    allowed = Rules(((calendar, "allow"),)).verdict(instant)
    assert (excluded is None) != (allowed is None)
    assert (excluded is not None) == calendar.contains(instant)


@settings(max_examples=100, deadline=None)
@given(
    expression=st.sampled_from(["*/7 * * * *", "0 * * * *", "30 2 * * 0", "*/15 * * * 1-5"]),
    duration_m=st.integers(min_value=1, max_value=180),
    instant=_instants,
)
def test_an_instant_is_in_a_recurring_window_iff_a_window_opened_within_its_duration(
    expression: str, duration_m: int, instant: datetime
) -> None:
    window = Window.of(_blackout("w", cron_expression=expression, duration_s=duration_m * 60))
    schedule = parse_schedule(expression, "UTC")
    width = timedelta(minutes=duration_m)
    opened = schedule.fire_times(instant - width, instant)  # s with instant - width < s <= instant
    end = window.end_at(instant)
    assert (end is None) == (not opened)
    if opened:
        assert end == opened[-1] + width and end > instant


@settings(max_examples=60, deadline=None)
@given(
    expression=st.sampled_from(["*/5 * * * *", "0 */2 * * *", "15 9 * * *"]),
    calendar=_calendars,
    start=_instants,
)
def test_a_filter_keeps_the_schedule_fire_times_and_only_labels_them(
    expression: str, calendar: Calendar, start: datetime
) -> None:
    """The filter never adds, drops or moves a tick (G2: each is a run or a recorded skip)."""
    plain, _ = job_schedule(expression, "UTC")
    ruled = filtered(plain, Rules(((calendar, "exclude"),)))
    assert isinstance(ruled, Filtered)
    end = start + timedelta(days=2)
    assert ruled.fire_times(start, end, 2000) == plain.fire_times(start, end, 2000)
    assert filtered(plain, Rules()) is plain


# --- the leader's planner ------------------------------------------------------------------------


def _book(
    jobs: list[DispatchJob], calendars: Sequence[Calendar] = (), blackouts: Sequence[Blackout] = ()
) -> ScheduleBook:
    book = ScheduleBook()
    book.rule_book = RuleBook.of(calendars, blackouts)
    book.apply(jobs, ())
    return book


def test_the_leader_skips_excluded_days_naming_the_calendar() -> None:
    job = _job(1, "0 9 * * *", T0, name="report", calendars=[CalendarRef(name="weekdays", mode="allow"),
                                                               CalendarRef(name="holidays")])  # fmt: skip
    rows = _ticks(_book([job], [WEEKDAYS, HOLIDAYS]), T0, T0 + timedelta(days=7))
    assert [(s.day, r) for s, _d, r in rows] == [
        (5, None), (6, "calendar:holidays"), (7, None), (8, "calendar:holidays"), (9, "calendar:holidays"),
        (10, "calendar:weekdays"), (11, "calendar:weekdays"),
    ]  # fmt: skip


def test_a_skip_blackout_skips_only_its_jobs_ticks() -> None:
    window = _blackout("deploy", starts_at=T0 + timedelta(minutes=10), ends_at=T0 + timedelta(minutes=20),
                       selector=Selector(jobs=["a"]))  # fmt: skip
    a, b = _job(1, "*/5 * * * *", T0, name="a"), _job(2, "*/5 * * * *", T0, name="b")
    book = _book([a, b], blackouts=[window])
    batches = _rounds(book, T0, T0 + timedelta(minutes=30))
    by_job = {
        j: [(s.minute, r) for bb in batches for jj, s, r in zip(bb.job_ids, bb.scheduled_for, bb.skip_reason,
                                                                  strict=True) if jj == j]
        for j in (1, 2)
    }  # fmt: skip
    assert by_job[1] == [(5, None), (10, "blackout:deploy"), (15, "blackout:deploy"), (20, None), (25, None),
                         (30, None)]  # fmt: skip
    assert all(r is None for _m, r in by_job[2]) and len(by_job[2]) == 6


def test_deferred_ticks_are_released_at_the_window_end_under_the_misfire_policy() -> None:
    end = T0 + timedelta(minutes=17)  # a tick at the release itself would be the lot's one run_once run
    window = _blackout("freeze", "defer", starts_at=T0 + timedelta(minutes=10), ends_at=end)
    for policy, expected in (
        ("run_once", [(5, None), (10, "blackout:freeze"), (15, None), (20, None)]),
        ("run_all", [(5, None), (10, None), (15, None), (20, None)]),
        ("skip", [(5, None), (10, "blackout:freeze"), (15, "blackout:freeze"), (20, None)]),
    ):
        job = _job(1, "*/5 * * * *", T0, name="j", misfire_policy=policy, misfire_grace_s=0.0)
        book = _book([job], blackouts=[window])
        rows = _ticks(book, T0, T0 + timedelta(minutes=20))
        assert [(s.minute, r) for s, _d, r in rows] == expected, policy
        released = [d for s, d, r in rows if r is None and T0 + timedelta(minutes=10) <= s < end]
        assert all(d >= end for d in released), policy  # nothing runs inside the window
        if policy == "run_all":  # paced by the catch-up pace, not all at once
            assert released[1] > released[0]
    # While the window lasts, the leader's next instant for the job is its end: no busy loop.
    book = _book([_job(1, "*/5 * * * *", T0, name="j")], blackouts=[window])
    _rounds(book, T0, T0 + timedelta(minutes=12))
    assert book.next_due() == end


def test_jobs_without_rules_share_the_plain_schedule_group() -> None:
    window = _blackout("x", starts_at=T0, ends_at=T0 + timedelta(minutes=1), selector=Selector(jobs=["a"]))
    book = _book([_job(1, "* * * * *", T0, name="a"), _job(2, "* * * * *", T0, name="b"),
                  _job(3, "* * * * *", T0, name="c")], blackouts=[window])  # fmt: skip
    assert book.group_count == 2  # `a` alone under its blackout; b and c together, unfiltered
    plain = [g.schedule for g in book._groups.values() if len(g.jobs) == 2]
    assert len(plain) == 1 and type(plain[0]) is Windowed


def test_misfired_ticks_before_an_excluded_newest_still_run_once() -> None:
    """run_once after an outage: the newest tick the calendar allows stands for the lot."""
    job = _job(1, "0 9 * * *", T0, name="r", misfire_policy="run_once", calendars=[CalendarRef(name="holidays")])
    book = _book([job], [HOLIDAYS])
    with book.round(T0 + timedelta(days=1, hours=10)) as ticks:  # Mon and Tue (a holiday) due, late
        rows = [(s.day, r) for b in ticks for s, r in zip(b.scheduled_for, b.skip_reason, strict=True)]
    assert rows == [(5, None), (6, "calendar:holidays")]
    assert SKIP_MISFIRED not in [r for _d, r in rows]


def test_the_auditor_does_not_count_ticks_a_blackout_still_holds_as_unaccounted() -> None:
    """G2's auditor: a held tick is not missing until its release has passed."""
    from dispatcher.auditor import AuditedJob, reconcile

    window = _blackout("freeze", "defer", starts_at=T0, ends_at=T0 + timedelta(hours=2))
    job = AuditedJob(id=1, cron_expression="*/10 * * * *", timezone="UTC", created_at=T0 - timedelta(days=1),
                     name="j")  # fmt: skip
    audit = (T0, T0 + timedelta(minutes=30))
    held = reconcile([job], set(), audit, RuleBook.of([], [window]))
    assert held.expected == 3 and held.unaccounted == []
    assert len(reconcile([job], set(), audit).unaccounted) == 3  # without the blackout: missing
    late = (T0 + timedelta(hours=2), T0 + timedelta(hours=2, minutes=30))  # after the release: missing
    assert len(reconcile([job], set(), late, RuleBook.of([], [window])).unaccounted) == 3
