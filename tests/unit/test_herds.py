"""Herds: an instant at which many jobs are due is planned early, in proportion to its size,
whatever schedules bring its jobs there; small instants are left to the ticker's lookahead."""

from __future__ import annotations

from datetime import timedelta

from dispatcher.herds import Herds
from dispatcher.schedule_book import ScheduleBook
from tests.unit.test_planner import T0, _job

MINUTE = T0 + timedelta(minutes=1)


def test_an_instant_is_planned_ahead_by_its_jobs_over_the_write_pace() -> None:
    herds = Herds(per_s=1000, most_s=30, min_jobs=100)
    herds.add(MINUTE, 2000)
    herds.add(MINUTE, 3000)
    assert herds.load(MINUTE) == 5000
    assert herds.next_plan() == MINUTE - timedelta(seconds=5)
    herds.remove(MINUTE, 4950)  # below min_jobs: no herd any more
    assert herds.next_plan() is None and herds.load(MINUTE) == 50


def test_a_herd_is_planned_its_push_lead_earlier_too() -> None:
    """In the ledger by its push time, not its due time: its tokens go out a lead before it is due."""
    herds = Herds(per_s=1000, most_s=30, min_jobs=100, lead_s=0.25)
    herds.add(MINUTE, 5000)
    assert herds.next_plan() == MINUTE - timedelta(seconds=5.25)
    herds.add(MINUTE + timedelta(minutes=1), 1_000_000)
    assert herds.plan_at(MINUTE, 1_000_000) == MINUTE - timedelta(seconds=30.25)


def test_the_lead_has_a_ceiling_and_due_by_takes_the_latest_herd_whose_time_came() -> None:
    herds = Herds(per_s=1000, most_s=30, min_jobs=100)
    later = MINUTE + timedelta(minutes=1)
    herds.add(MINUTE, 1_000_000)
    herds.add(later, 1_000_000)
    assert herds.next_plan() == MINUTE - timedelta(seconds=30)
    assert herds.due_by(MINUTE - timedelta(seconds=31)) is None
    assert herds.due_by(later - timedelta(seconds=30)) == later
    assert herds.next_plan() is None


def test_the_book_writes_a_herd_ahead_and_a_small_group_at_its_lookahead() -> None:
    book = ScheduleBook(herds=Herds(per_s=1000, min_jobs=100))
    # 3000 jobs at the minute over three schedules (a herd is an instant, not a schedule).
    expressions = ["* * * * *", "1 12 * * *", "1-59/2 * * * *"]
    book.apply([_job(i, expressions[i % 3], T0) for i in range(3000)], ())
    book.apply([_job(5000, "30 * * * * *", T0)], ())  # one job at :30
    assert book.next_due() == T0 + timedelta(seconds=30)
    assert book.next_herd() == MINUTE - timedelta(seconds=3)
    early = MINUTE - timedelta(seconds=3)
    with book.round(early, horizon=early + timedelta(seconds=1)) as ticks:
        batches = list(ticks)
        for batch in batches:
            book.advance(batch)
    planned = {(j, s) for b in batches for j, s in zip(b.job_ids, b.scheduled_for, strict=True)}
    assert {s for _j, s in planned} == {T0 + timedelta(seconds=30), MINUTE}
    assert len(planned) == 3001
    # Each group is due again at its own next instant: 12:02 holds the 1000 jobs of `* * * * *`.
    assert book.next_herd() == T0 + timedelta(minutes=2) - timedelta(seconds=1)


def test_jobs_leaving_a_herd_take_their_load_with_them() -> None:
    herds = Herds(per_s=1000, min_jobs=100)
    book = ScheduleBook(herds=herds)
    book.apply([_job(i, "* * * * *", T0) for i in range(2000)], ())
    assert herds.load(MINUTE) == 2000
    book.apply((), range(1500))
    assert herds.load(MINUTE) == 500 and book.next_herd() == MINUTE - timedelta(seconds=0.5)
    book.apply((), range(1500, 2000))
    assert herds.load(MINUTE) == 0 and book.next_herd() is None
    book.apply([_job(1, "* * * * *", T0)], ())
    book.clear()
    assert herds.load(MINUTE) == 0
