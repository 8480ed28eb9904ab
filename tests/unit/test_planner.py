"""The pure planner and the schedule book, driven with a fake clock through the tick round
the ticker uses (`ScheduleBook.round`), committing every batch at once."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronos.lifecycle import jitter_s
from cronos.models import DispatchJob
from cronos.schedule import parse_schedule
from dispatcher.planner import FireTimes, TickBatch, TickRound
from dispatcher.schedule_book import ScheduleBook

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _job(job_id: int, expression: str | None, cursor: datetime, **kw: Any) -> DispatchJob:
    fields: dict[str, Any] = {
        "timezone": "UTC",
        "misfire_policy": "run_all",
        "misfire_grace_s": 60.0,
        "jitter_s": 0.0,
        "concurrency_policy": "forbid",
        "status": "active",
    }
    fields.update(kw)
    return DispatchJob(id=job_id, cron_expression=expression, cursor=cursor, **fields)


def _book(jobs: list[DispatchJob]) -> ScheduleBook:
    book = ScheduleBook()
    book.apply(jobs, ())
    return book


def _plan(groups: list[tuple[FireTimes, list[DispatchJob]]], now: datetime, **limits: Any) -> list[TickBatch]:
    return list(TickRound(groups, now, **limits))


def _rows(batches: list[TickBatch]) -> list[tuple[int, datetime, str | None]]:
    return [(j, s, r) for b in batches for j, s, r in zip(b.job_ids, b.scheduled_for, b.skip_reason, strict=True)]


def tick(book: ScheduleBook, now: datetime) -> list[TickBatch]:
    """One round of the ticker without the ledger: every batch commits."""
    with book.round(now) as ticks:
        batches = list(ticks)
        for batch in batches:
            book.advance(batch)
    return batches


def simulate(jobs: list[DispatchJob], start: datetime, end: datetime) -> dict[int, list[datetime]]:
    """Run the dispatcher's loop on a fake clock: wake at each next due instant, run a round."""
    book = _book(jobs)
    fired: dict[int, list[datetime]] = {j.id: [] for j in jobs}
    now = start
    while (due := book.next_due()) is not None and due <= end:
        now = max(now, due)
        for job_id, scheduled_for, reason in _rows(tick(book, now)):
            assert reason is None, "an on-time loop never skips"
            fired[job_id].append(scheduled_for)
    return fired


def test_six_field_schedule_dispatches_exactly_every_matching_second() -> None:
    fired = simulate([_job(1, "*/15 * * * * *", T0), _job(2, "5 * * * * *", T0)], T0, T0 + timedelta(minutes=2))
    assert fired[1] == [T0 + timedelta(seconds=s) for s in range(15, 121, 15)]
    assert fired[2] == [T0 + timedelta(seconds=5), T0 + timedelta(seconds=65)]


def test_dst_spring_forward_wall_clock_job_fires_once_after_the_gap() -> None:
    start = datetime(2026, 3, 28, 0, 0, tzinfo=UTC)
    fired = simulate([_job(1, "30 2 * * *", start, timezone="Europe/Berlin")], start, start + timedelta(days=3))
    # 02:30 CET = 01:30Z; on the 29th 02:30 does not exist: once at 03:00 CEST = 01:00Z; then 00:30Z.
    assert fired[1] == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
    ]


def test_dst_fall_back_day_has_fifty_half_hours_and_one_daily_fire() -> None:
    start = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)  # 00:00 CEST on the 25th
    end = datetime(2026, 10, 25, 23, 0, tzinfo=UTC)  # 00:00 CET on the 26th: a 25-hour day
    jobs = [
        _job(1, "*/30 * * * *", start, timezone="Europe/Berlin"),
        _job(2, "30 2 * * *", start, timezone="Europe/Berlin"),
    ]
    fired = simulate(jobs, start, end)
    assert len(fired[1]) == 50
    assert fired[1] == [start + timedelta(minutes=30 * i) for i in range(1, 51)]
    assert fired[2] == [datetime(2026, 10, 25, 0, 30, tzinfo=UTC)]  # first pass of 02:30 (CEST)


class CountingSchedule:
    def __init__(self, expression: str) -> None:
        self.inner = parse_schedule(expression)
        self.calls = 0

    def fire_times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
        self.calls += 1
        return self.inner.fire_times(after, until, limit)


def test_fire_times_are_computed_once_per_group_not_per_job() -> None:
    every, five = CountingSchedule("* * * * * *"), CountingSchedule("*/5 * * * * *")
    jobs_a = [_job(i, "* * * * * *", T0) for i in range(500)]
    jobs_b = [_job(1000 + i, "*/5 * * * * *", T0) for i in range(500)]
    ticks = TickRound([(every, jobs_a), (five, jobs_b)], T0 + timedelta(seconds=5), batch_rows=700)
    batches = list(ticks)
    assert (every.calls, five.calls) == (1, 1)
    assert ticks.runs == 500 * 5 + 500 and ticks.skips == 0 and not ticks.truncated
    for batch in batches:  # a job's ticks and its cursor always travel in one batch
        assert set(batch.job_ids) == set(batch.cursors)


def test_catch_up_applies_each_policy_and_moves_the_cursor_to_the_last_tick() -> None:
    now = T0 + timedelta(seconds=100.5)
    sched = parse_schedule("*/10 * * * * *")
    jobs = [
        _job(1, "*/10 * * * * *", T0, misfire_policy="run_all", misfire_grace_s=35),
        _job(2, "*/10 * * * * *", T0, misfire_policy="run_once", misfire_grace_s=35),
        _job(3, "*/10 * * * * *", T0, misfire_policy="skip", misfire_grace_s=35),
    ]
    batches = _plan([(sched, jobs)], now)
    rows = _rows(batches)
    ticks = [T0 + timedelta(seconds=s) for s in range(10, 101, 10)]
    ran = {j: [s for jj, s, r in rows if jj == j and r is None] for j in (1, 2, 3)}
    skipped = {j: [s for jj, s, r in rows if jj == j and r == "misfired"] for j in (1, 2, 3)}
    # 70, 80, 90 are late within the grace and 100 is on time: they run under every policy.
    # 10..60 misfired: run_all runs them, run_once lets 70 stand for them, skip skips them.
    assert ran[1] == ticks and skipped[1] == []
    assert ran[2] == ticks[-4:] and skipped[2] == ticks[:-4]
    assert ran[3] == ticks[-4:] and skipped[3] == ticks[:-4]
    assert batches[0].cursors == {1: ticks[-1], 2: ticks[-1], 3: ticks[-1]}


def test_late_runs_are_spread_out_and_on_time_ones_keep_their_jitter() -> None:
    now = T0 + timedelta(seconds=30.2)
    sched = parse_schedule("* * * * * *")
    jobs = [_job(1, "* * * * * *", T0, misfire_grace_s=3600), _job(2, "* * * * * *", T0, jitter_s=0.5)]
    (batch,) = _plan([(sched, jobs)], now)
    late = [
        d
        for j, s, d in zip(batch.job_ids, batch.scheduled_for, batch.due_at, strict=True)
        if j == 1 and s < now - timedelta(seconds=1)
    ]
    assert len(late) == 29
    assert all(d >= now for d in late) and late == sorted(late) and late[-1] > late[0]
    on_time = [
        (s, d)
        for j, s, d in zip(batch.job_ids, batch.scheduled_for, batch.due_at, strict=True)
        if j == 2 and s >= now - timedelta(seconds=1)
    ]
    for tick, due in on_time:
        assert due - tick == timedelta(seconds=jitter_s(2, int(tick.timestamp() * 1000), 0.5))


def test_a_long_outage_is_caught_up_in_capped_rounds_without_losing_a_tick() -> None:
    book = _book([_job(1, "* * * * * *", T0, misfire_policy="run_once", misfire_grace_s=10)])
    now = T0 + timedelta(seconds=2500)
    seen: list[tuple[datetime, str | None]] = []
    rounds = 0
    while (due := book.next_due()) is not None and due <= now:
        rounds += 1
        seen.extend((s, r) for _j, s, r in _rows(tick(book, now)))
    assert rounds == 3  # JOB_ROUND_LIMIT ticks a round
    assert [s for s, _ in seen] == [T0 + timedelta(seconds=i) for i in range(1, 2501)]
    # run_once: the ticks within the 10 s grace run; the misfired ones before them are skipped (the
    # one exactly 10 s late too: now >= its expiry).
    assert [s for s, r in seen if r is None] == [T0 + timedelta(seconds=i) for i in range(2491, 2501)]


def test_book_moves_a_job_between_groups_and_forgets_removed_jobs() -> None:
    book = _book([_job(1, "0 * * * * *", T0), _job(2, "0 * * * * *", T0)])
    assert book.group_count == 1 and book.next_due() == T0 + timedelta(minutes=1)
    book.apply([_job(1, "*/5 * * * * *", T0)], ())
    assert book.group_count == 2 and book.next_due() == T0 + timedelta(seconds=5)
    book.apply((), [1, 2])
    assert len(book) == 0 and book.next_due() is None
    book.apply([_job(3, "not a cron", T0)], ())  # logged and left out, never raised
    assert 3 not in book


def test_a_cursor_only_moves_forward_and_a_failed_round_still_settles() -> None:
    book = _book([_job(1, "*/5 * * * * *", T0)])
    tick(book, T0 + timedelta(seconds=10))
    assert book.next_due() == T0 + timedelta(seconds=15)
    book.apply([_job(1, "*/5 * * * * *", T0)], ())  # a resync reading an older cursor
    assert book.next_due() == T0 + timedelta(seconds=15), "the cursor never moves back"
    with pytest.raises(RuntimeError), book.round(T0 + timedelta(seconds=20)) as ticks:
        next(iter(ticks))
        raise RuntimeError("the ledger write failed")
    assert book.next_due() == T0 + timedelta(seconds=15), "not committed: due again, back on the heap"


def test_catch_up_pace_holds_across_capped_rounds() -> None:
    # 2500 misfired ticks under run_all, caught up in three capped rounds at 100 a second:
    # the second round's late runs queue behind the first's instead of starting over at `now`.
    book = ScheduleBook(catchup_per_s=100)
    book.apply([_job(1, "* * * * * *", T0, misfire_policy="run_all", misfire_grace_s=10)], ())
    now = T0 + timedelta(seconds=2500.5)
    late_before = now - timedelta(seconds=1)
    dues: list[datetime] = []
    while (due := book.next_due()) is not None and due <= now:
        for batch in tick(book, now):
            dues.extend(d for s, d in zip(batch.scheduled_for, batch.due_at, strict=True) if s < late_before)
    assert len(dues) == 2499
    assert dues == sorted(dues)
    assert dues[0] == now and dues[-1] == now + timedelta(seconds=2498 / 100)
    per_second = Counter(int((d - now).total_seconds()) for d in dues)
    assert max(per_second.values()) == 100


def test_a_newer_schedule_takes_its_cursor_back_to_the_change_and_ticks_record_their_revision() -> None:
    book = _book([_job(1, "*/5 * * * * *", T0)])
    with book.round(T0 + timedelta(seconds=5), horizon=T0 + timedelta(seconds=6)) as ticks:
        batches = list(ticks)
        for batch in batches:
            book.advance(batch)
    assert _rows(batches) == [(1, T0 + timedelta(seconds=5), None)] and batches[0].revision == [1]
    # The schedule changed at T0+4.5 s, while T0+5 s was written ahead: planned again from there,
    # under the new revision (the ledger keeps a tick both schedules fire at once).
    changed_at = T0 + timedelta(seconds=4.5)
    book.apply([_job(1, "* * * * * *", changed_at, revision=2, plan_revision=2)], ())
    assert book.next_due() == T0 + timedelta(seconds=5)
    batches = tick(book, T0 + timedelta(seconds=6))
    assert [s for _, s, _ in _rows(batches)] == [T0 + timedelta(seconds=5), T0 + timedelta(seconds=6)]
    assert batches[0].revision == [2, 2]
    # A read from before that change (a slow resync) changes nothing; a later revision of the same
    # schedule (a payload change) keeps the cursor and is recorded by the next ticks.
    book.apply([_job(1, "*/5 * * * * *", T0, revision=1, plan_revision=1)], ())
    assert book.next_due() == T0 + timedelta(seconds=7)
    book.apply([_job(1, "* * * * * *", changed_at, revision=3, plan_revision=2)], ())
    assert book.next_due() == T0 + timedelta(seconds=7)
    assert tick(book, T0 + timedelta(seconds=7))[0].revision == [3]


def test_ticks_of_jobs_of_the_default_policies_carry_when_a_pending_run_holds_them_back() -> None:
    """lifecycle.one_pending (issue 38): run_once + forbid ticks carry the round's instant, at which
    a run of their job not started and not expired holds them back; others None. Every tick carries
    its expiry, stamped from its due time and its job's grace (lifecycle.expiry)."""
    now = T0 + timedelta(seconds=3.5)
    jobs = [
        _job(1, "* * * * * *", T0, misfire_policy="run_once", misfire_grace_s=30.0),
        _job(2, "* * * * * *", T0, misfire_policy="run_all"),
        _job(3, "* * * * * *", T0, misfire_policy="run_once", concurrency_policy="allow"),
        _job(4, "* * * * * *", T0, misfire_policy="run_once", misfire_grace_s=0.0),
    ]
    batches = tick(_book(jobs), now)
    held = {j: h for b in batches for j, h in zip(b.job_ids, b.held_at, strict=True)}
    assert held == {1: now, 2: None, 3: None, 4: now}
    expiries = {j: e - d for b in batches for j, d, e in zip(b.job_ids, b.due_at, b.expires_at, strict=True)}
    assert expiries == {j: timedelta(seconds=s) for j, s in {1: 30, 2: 60, 3: 60, 4: 1}.items()}  # 4: the floor
