"""The runs due ahead per queue (dispatcher.due_ahead) over the leader's schedule book, against
hand counts and against the planner itself writing the same window ahead of time."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from cronos.rules import Blackout, Calendar, CalendarRef, Selector
from dispatcher.due_ahead import HORIZONS_S, NOTHING, Due, runs_due
from dispatcher.due_gauge import compute
from dispatcher.schedule_book import ScheduleBook
from tests.unit.test_planner import _job
from tests.unit.test_rules import _book
from tests.unit.test_schedule_window import _rounds

NOW = datetime(2026, 1, 5, 11, 59, 30, 250_000, tzinfo=UTC)  # a Monday, 30.25 s before noon
LONGEST = timedelta(seconds=max(HORIZONS_S))


def _due(book: ScheduleBook, now: datetime = NOW) -> dict[str, Due]:
    return runs_due(book.ahead(now + LONGEST), now)


def _runs(due: dict[str, Due]) -> dict[str, tuple[int, ...]]:
    """Each queue's runs within 30, 60 and 300 s."""
    return {queue: tuple(d.runs[h] for h in HORIZONS_S) for queue, d in due.items()}


def test_each_queue_counts_each_jobs_ticks_within_each_horizon() -> None:
    jobs = [
        _job(1, "* * * * * *", NOW, queue="fast"),  # every second
        _job(2, "* * * * * *", NOW, queue="fast"),
        _job(3, "*/5 * * * * *", NOW, queue="fast"),  # every 5 s
        _job(4, "0 * * * * *", NOW, queue="gpu"),  # every minute, at :00
        _job(5, "0 * * * * *", NOW, queue="default"),
        _job(6, "0 0 * * *", NOW, queue="gpu"),  # midnight: nothing within 300 s
    ]
    due = _due(_book(jobs))
    assert _runs(due) == {
        "fast": (2 * 30 + 6, 2 * 60 + 12, 2 * 300 + 60),
        "gpu": (1, 1, 5),  # noon falls within 30 s (29.75 s away), then one a minute
        "default": (1, 1, 5),
    }
    # The peak second: both every-second jobs and the 5-s one share a second every 5 s.
    assert due["fast"].peak == {30: 3, 60: 3, 300: 3}
    assert due["gpu"].peak == {30: 1, 60: 1, 300: 1}


def test_a_herd_is_its_peak_second() -> None:
    herd = [_job(i, "* * * * *", NOW, queue="batch") for i in range(1, 1001)]
    due = _due(_book([*herd, _job(2000, "*/10 * * * * *", NOW, queue="batch")]))["batch"]
    assert due.peak == {30: 1001, 60: 1001, 300: 1001}  # noon: the herd and the 10-s job at once
    assert due.runs == {30: 1000 + 3, 60: 1000 + 6, 300: 5000 + 30}


def test_only_groups_due_within_the_longest_horizon_are_read() -> None:
    book = _book([_job(1, "* * * * *", NOW), _job(2, "0 0 * * *", NOW), _job(3, "0 13 * * *", NOW)])
    assert [set(g.jobs) for g in book.ahead(NOW + LONGEST)] == [{1}]
    assert book.ahead(NOW) == []
    assert book.next_due() == datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # left on the heap
    assert len(_rounds(book, NOW, NOW + timedelta(seconds=31))) == 1  # and the leader still ticks it


def test_a_group_the_leader_is_writing_still_counts() -> None:
    """A herd's round takes a while (its batches are written one after the other): its group is off
    the heap meanwhile, and still counted."""
    book = _book([_job(i, "* * * * *", NOW, queue="batch") for i in range(1, 101)])
    before = _runs(_due(book))
    noon = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    with book.round(noon - timedelta(seconds=1), horizon=noon, batch_rows=10) as ticks:
        for batch in ticks:
            book.advance(batch)
            assert _runs(_due(book)) == before  # between two batches, as the gauge loop may run
    assert _runs(_due(book)) == before
    assert book._planning == []


def test_paused_and_deleted_jobs_count_for_nothing() -> None:
    """The ticker removes a job from the book when it is paused or deleted (a timed pause too)."""
    book = _book([_job(1, "* * * * * *", NOW, queue="q"), _job(2, "* * * * * *", NOW, queue="q")])
    book.apply((), [2])  # paused
    assert _runs(_due(book)) == {"q": (30, 60, 300)}
    book.apply((), [1])
    assert _due(book) == {}
    assert asyncio.run(compute(book, NOW)) == {"default": NOTHING}  # the queue is gone from the series too


def test_a_job_moved_to_another_queue_counts_there() -> None:
    book = _book([_job(1, "* * * * * *", NOW, queue="a")])
    book.apply([_job(1, "* * * * * *", NOW, queue="b")], ())
    assert _runs(_due(book)) == {"b": (30, 60, 300)}
    assert set(asyncio.run(compute(book, NOW))) == {"b", "default"}
    assert book.queues == Counter({"b": 1})


def test_a_calendar_day_off_counts_for_nothing() -> None:
    weekend = Calendar(name="weekend", weekdays=["sat", "sun"])
    sunday = datetime(2026, 1, 4, 23, 58, tzinfo=UTC)  # Monday starts in 2 minutes
    jobs = [
        _job(1, "* * * * * *", sunday, name="off-on-weekends", calendars=[CalendarRef(name="weekend")]),
        _job(2, "* * * * * *", sunday, name="every-day"),
    ]
    due = _due(_book(jobs, [weekend]), sunday)
    assert due["default"].runs == {30: 30, 60: 60, 300: 300 + 181}  # job 1 from Monday 00:00:00 only


def test_a_skip_blackout_drops_its_ticks_and_a_defer_one_runs_them_once_at_its_end() -> None:
    end = NOW + timedelta(seconds=100)
    skip = Blackout(id=1, name="deploy", action="skip", starts_at=NOW - timedelta(hours=1), ends_at=end,
                    selector=Selector(queues=["s"]))  # fmt: skip
    defer = Blackout(id=2, name="freeze", action="defer", starts_at=NOW - timedelta(hours=1), ends_at=end,
                     selector=Selector(queues=["d"]))  # fmt: skip
    # The deferred job's cursor is at the window's start: its ticks since then are held.
    held_since = NOW - timedelta(minutes=10)
    jobs = [
        _job(1, "* * * * * *", NOW, queue="s", name="a"),
        _job(2, "* * * * * *", held_since, queue="d", name="b"),
        _job(3, "* * * * * *", held_since, queue="d", name="c"),
    ]
    due = _due(_book(jobs, blackouts=[skip, defer]))
    assert due["s"].runs == {30: 0, 60: 0, 300: 200}  # after the window only
    # Each deferred job runs once at the window's end (run_once), then every second.
    assert due["d"].runs == {30: 0, 60: 0, 300: 2 * (1 + 200)}
    assert due["d"].peak[300] == 2


def test_a_window_end_and_max_runs_bound_the_count() -> None:
    jobs = [
        _job(1, "* * * * * *", NOW, end_at=NOW + timedelta(seconds=10)),
        _job(2, "* * * * * *", NOW, runs_left=3),
        _job(3, "* * * * * *", NOW, runs_left=0),
    ]
    assert _runs(_due(_book(jobs))) == {"default": (10 + 3, 10 + 3, 10 + 3)}


def test_ticks_already_written_ahead_still_count_until_due() -> None:
    """The leader writes ticks up to a second early (queued, pushed when due): not started, so due."""
    book = _book([_job(1, "* * * * * *", NOW)])
    with book.round(NOW, horizon=NOW + timedelta(seconds=1)) as ticks:
        for batch in ticks:
            book.advance(batch)
    assert _runs(_due(book)) == {"default": (30, 60, 300)}


EXPRESSIONS = ("* * * * * *", "*/7 * * * * *", "*/15 * * * * *", "0 * * * * *", "*/2 * * * *", "30 12 * * *")


@settings(max_examples=60, deadline=None)
@given(
    jobs=st.lists(st.tuples(st.sampled_from(EXPRESSIONS), st.sampled_from(("a", "b", "c"))), min_size=1, max_size=8),
    offset_ms=st.integers(min_value=0, max_value=86_400_000),
)
def test_the_count_is_what_the_planner_writes_for_the_same_window(jobs: list[tuple[str, str]], offset_ms: int) -> None:
    """Independent of the counting: the planner writes the window ahead (as the ticker's lookahead
    does), and its queued rows per queue, and per second, are the gauges'."""
    now = NOW + timedelta(milliseconds=offset_ms)
    due = _due(_book([_job(i, expr, now, queue=queue) for i, (expr, queue) in enumerate(jobs, 1)]), now)
    planner = _book([_job(i, expr, now, queue=queue) for i, (expr, queue) in enumerate(jobs, 1)])
    for horizon in HORIZONS_S:
        until = now + timedelta(seconds=horizon)
        with planner.round(now, horizon=until) as ticks:  # nothing advanced: the book is as before
            rows = [row for batch in ticks for row in zip(batch.job_ids, batch.scheduled_for, batch.skip_reason,
                                                          strict=True)]  # fmt: skip
        per_second = Counter(
            (jobs[job_id - 1][1], math.ceil((tick - now).total_seconds())) for job_id, tick, reason in rows
            if reason is None
        )  # fmt: skip
        for queue in {"a", "b", "c"}:
            counts = [n for (q, _second), n in per_second.items() if q == queue]
            assert due.get(queue, NOTHING).runs[horizon] == sum(counts), (queue, horizon)
            assert due.get(queue, NOTHING).peak[horizon] == max(counts, default=0), (queue, horizon)
