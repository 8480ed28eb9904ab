"""Windows, one-offs, max_runs and the per-job catch-up pace: the pure schedule (Windowed,
OneOff) and the planner/schedule book that end a job when they plan its last tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from cronos.schedule import parse_schedule
from cronos.schedule_window import NEVER, OneOff, Windowed, job_schedule, window_over
from dispatcher.planner import TickBatch
from dispatcher.schedule_book import ScheduleBook
from tests.unit.test_planner import _job

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def _rounds(book: ScheduleBook, start: datetime, end: datetime) -> list[TickBatch]:
    """The ticker's loop on a fake clock: wake at each next due instant until `end`."""
    batches: list[TickBatch] = []
    now = start
    while now <= end:
        with book.round(now) as ticks:
            for batch in ticks:
                batches.append(batch)
                book.advance(batch)
        due = book.next_due()
        if due is None:
            break
        now = max(now + timedelta(milliseconds=1), due)
    return batches


def _ticks(batches: list[TickBatch], job_id: int) -> list[datetime]:
    return [s for b in batches for j, s in zip(b.job_ids, b.scheduled_for, strict=True) if j == job_id]


def _ended(batches: list[TickBatch]) -> dict[int, str]:
    return {job_id: status for b in batches for job_id, (status, _rev) in b.ended.items()}


def test_a_window_clamps_fire_times_at_both_ends_inclusive() -> None:
    window = Windowed(parse_schedule("* * * * * *"), T0 + 3 * S, T0 + 6 * S)
    assert window.fire_times(T0, T0 + 60 * S) == [T0 + n * S for n in range(3, 7)]
    assert window.next_after(T0 + 6 * S) == NEVER
    assert window.over_after(T0 + 6 * S) and not window.over_after(T0 + 5 * S)
    assert window.due_after(T0 + 10 * S) == T0 + 10 * S  # over: due at once, to be ended
    unbounded = Windowed(parse_schedule("* * * * * *"), start_at=T0 + 3 * S)
    assert not unbounded.over_after(T0 + 100 * S) and unbounded.due_after(T0) == T0 + 3 * S


def test_a_one_off_fires_once_and_is_over_after_it() -> None:
    once, _notice = job_schedule(None, "UTC", run_at=T0 + 2.5 * S)
    assert once.one_off and once.fire_times(T0, T0 + 60 * S) == [T0 + 2.5 * S]
    assert once.fire_times(T0 + 2.5 * S, T0 + 60 * S) == []
    assert once.over_after(T0 + 2.5 * S) and not once.over_after(T0)
    assert OneOff(T0).next_after(T0) == NEVER


def test_window_over_at_creation() -> None:
    every_second = Windowed(parse_schedule("* * * * * *"), end_at=T0)
    assert window_over(every_second, T0 + S, T0 + S)
    assert not window_over(every_second, T0 - 5 * S, T0 - 5 * S)
    once = Windowed(OneOff(T0))
    assert not window_over(once, T0 + 30 * S, T0 + 30 * S, grace_s=60)  # late within the grace: it runs
    assert window_over(once, T0 + 61 * S, T0 + 61 * S, grace_s=60)
    assert window_over(Windowed(parse_schedule("* * * * *")), T0, T0, runs_left=0)


def test_the_book_writes_a_window_and_ends_the_job_with_its_last_tick() -> None:
    book = ScheduleBook()
    book.apply([_job(1, "* * * * * *", T0, start_at=T0 + 3 * S, end_at=T0 + 6 * S), _job(2, "* * * * * *", T0)], ())
    batches = _rounds(book, T0, T0 + 10 * S)
    assert _ticks(batches, 1) == [T0 + n * S for n in range(3, 7)]
    assert _ended(batches) == {1: "completed"}
    last = next(b for b in batches if 1 in b.ended)
    assert T0 + 6 * S in last.scheduled_for  # ended by the batch that holds its last tick
    assert 1 not in book and 2 in book and len(_ticks(batches, 2)) >= 10


def test_max_runs_counts_runs_not_skips_and_ends_the_job() -> None:
    book = ScheduleBook()
    book.apply([_job(1, "* * * * * *", T0, runs_left=3), _job(2, "* * * * * *", T0, runs_left=5)], ())
    batches = _rounds(book, T0, T0 + 10 * S)
    assert _ticks(batches, 1) == [T0 + S, T0 + 2 * S, T0 + 3 * S]
    assert len(_ticks(batches, 2)) == 5 and _ended(batches) == {1: "completed", 2: "completed"}
    # A catch-up past the grace with `skip`: skipped ticks are written but do not count.
    book = ScheduleBook()
    book.apply([_job(3, "* * * * * *", T0, runs_left=2, misfire_policy="skip", misfire_grace_s=1.0)], ())
    batches = _rounds(book, T0 + 5 * S, T0 + 20 * S)
    rows = [(s, r) for b in batches for j, s, r in zip(b.job_ids, b.scheduled_for, b.skip_reason, strict=True)]
    assert sum(r is None for _s, r in rows) == 2 and sum(r is not None for _s, r in rows) >= 3
    assert _ended(batches) == {3: "completed"}


def test_a_one_off_runs_once_and_completes_or_expires_when_skipped() -> None:
    book = ScheduleBook()
    book.apply([_job(1, None, T0, run_at=T0 + 2 * S), _job(2, None, T0 - 100 * S, run_at=T0 - 90 * S)], ())
    book.apply([_job(3, None, T0 - 100 * S, run_at=T0 - 90 * S, misfire_policy="skip", misfire_grace_s=5.0)], ())
    batches = _rounds(book, T0, T0 + 10 * S)
    assert _ticks(batches, 1) == [T0 + 2 * S] and _ticks(batches, 2) == [T0 - 90 * S]
    assert _ended(batches) == {1: "completed", 2: "completed", 3: "expired"}  # 2 ran late (run_all), 3 skipped
    assert len(book) == 0 and book.next_due() is None


def test_a_job_past_its_window_is_ended_without_a_tick() -> None:
    book = ScheduleBook()
    book.apply([_job(1, "* * * * *", T0, end_at=T0 - 3600 * S)], ())
    batches = _rounds(book, T0, T0 + S)
    assert _ticks(batches, 1) == [] and _ended(batches) == {1: "completed"} and len(book) == 0


def test_a_per_job_pace_spreads_its_late_runs_at_its_own_rate() -> None:
    book = ScheduleBook(catchup_per_s=1000.0)
    slow = _job(1, "* * * * * *", T0 - 20 * S, catchup_max_per_s=2.0, misfire_grace_s=3600.0)
    fast = _job(2, "* * * * * *", T0 - 20 * S, misfire_grace_s=3600.0)
    book.apply([slow, fast], ())
    with book.round(T0) as ticks:
        batches = list(ticks)
    due = {j: sorted(d for b in batches for jj, d in zip(b.job_ids, b.due_at, strict=True) if jj == j) for j in (1, 2)}
    assert len(due[1]) == len(due[2]) == 20
    # The late runs (due from now on): half a second apart at 2/s; at the global 1000/s, 18 ms in all.
    paced = sorted({d for d in due[1] if d >= T0})  # (the tick at T0 is on time: due at T0 too)
    assert len(paced) >= 17 and {b - a for a, b in pairwise(paced)} == {timedelta(seconds=0.5)}
    assert max(d for d in due[2] if d >= T0) - T0 < timedelta(seconds=0.1)
