"""The chaos suite's invariant checker catches each kind of violation on synthetic ledgers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from tests.cluster.checker import JobDef, RunRow, check, delivery_key
from tests.cluster.receiver import Delivery
from tests.cluster.ticks import Matcher, expected_ticks

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
WINDOW = (T0, T0 + timedelta(seconds=10))
EVERY_SECOND = JobDef(id=1, cron_expression="* * * * * *", created_at=T0 - timedelta(seconds=5))
LEADERS = {1: T0 - timedelta(seconds=30), 2: T0 + timedelta(seconds=5)}


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def clean_runs(job: JobDef = EVERY_SECOND, count: int = 10) -> list[RunRow]:
    """One completed run per tick, each 0.1 s after its tick for 0.5 s; epoch 2 from T0+5 s on."""
    runs = []
    for i in range(1, count + 1):
        tick = T0 + s(i)
        epoch = 1 if tick < LEADERS[2] else 2
        runs.append(
            RunRow(
                id=i,
                job_id=job.id,
                scheduled_for=tick,
                attempt=1,
                trigger="schedule",
                state="completed",
                due_at=tick,
                created_at=tick - s(0.01),
                epoch=epoch,
                node_id="e1",
                started_at=tick + s(0.1),
                finished_at=tick + s(0.6),
            )
        )
    return runs


def codes(
    runs: list[RunRow], jobs: tuple[JobDef, ...] = (EVERY_SECOND,), deliveries: tuple[Delivery, ...] = ()
) -> set[str]:
    return set(check(jobs, runs, LEADERS, WINDOW, deliveries).codes())


def test_a_clean_ledger_passes_with_figures() -> None:
    report = check([EVERY_SECOND], clean_runs(), LEADERS, WINDOW)
    assert report.ok, report.describe()
    assert report.expected == 10
    assert report.states["completed"] == 10
    assert report.start_delays_s == pytest.approx([0.1] * 10)


def test_g2_a_missing_tick_is_reported() -> None:
    runs = clean_runs()
    del runs[3]
    assert codes(runs) == {"G2.missing"}


def test_g2_a_skip_with_reason_counts_and_one_without_is_reported() -> None:
    runs = clean_runs()
    runs[2] = dataclasses.replace(runs[2], state="skipped", started_at=None, finished_at=None, skip_reason="misfired")
    report = check([EVERY_SECOND], runs, LEADERS, WINDOW)
    assert report.ok and report.skip_reasons["misfired"] == 1
    runs[2] = dataclasses.replace(runs[2], skip_reason=None)
    assert codes(runs) == {"G2.skip_without_reason"}


def test_g2_a_run_started_later_than_its_misfire_grace_is_reported() -> None:
    strict = dataclasses.replace(EVERY_SECOND, misfire_grace_s=2.0)
    runs = clean_runs(strict)
    runs[5] = dataclasses.replace(runs[5], started_at=runs[5].scheduled_for + s(7.1))  # grace 2 + slack 5
    runs[5] = dataclasses.replace(runs[5], finished_at=runs[5].scheduled_for + s(7.2))
    runs = runs[:6]  # nothing after it, so no overlap
    assert codes(runs, (strict,)) == {"G2.missing", "G2.ran_past_grace"}
    runs[5] = dataclasses.replace(runs[5], started_at=runs[5].scheduled_for + s(6.5))
    assert "G2.ran_past_grace" not in codes(runs, (strict,))


def test_g2_a_run_for_an_instant_that_is_not_a_tick_is_reported() -> None:
    job = dataclasses.replace(EVERY_SECOND, cron_expression="*/2 * * * * *")
    runs = [r for r in clean_runs(job) if r.scheduled_for.second % 2 == 0]
    assert codes(runs, (job,)) == set()
    odd = dataclasses.replace(runs[0], id=99, scheduled_for=T0 + s(3), due_at=T0 + s(3), started_at=T0 + s(3.1))
    odd = dataclasses.replace(odd, finished_at=T0 + s(3.2))
    assert codes([*runs, odd], (job,)) == {"G2.unexpected_tick"}


def test_g2_paused_jobs_and_ticks_before_creation_are_not_expected() -> None:
    late = dataclasses.replace(EVERY_SECOND, created_at=T0 + s(6.5))
    runs = [r for r in clean_runs() if r.scheduled_for > T0 + s(6.5)]
    assert check([late], runs, LEADERS, WINDOW).expected == 4
    assert codes(runs, (late,)) == set()
    assert codes([], (dataclasses.replace(EVERY_SECOND, status="paused"),)) == set()


def test_g1_the_same_tick_and_attempt_twice_is_reported() -> None:
    runs = clean_runs()
    runs.append(dataclasses.replace(runs[4], id=100, started_at=runs[4].finished_at, finished_at=runs[4].finished_at))
    assert "G1.duplicate" in codes(runs)


def test_g3_overlapping_runs_of_a_forbid_job_are_reported_not_of_an_allow_job() -> None:
    runs = clean_runs()
    runs[4] = dataclasses.replace(runs[4], finished_at=runs[4].scheduled_for + s(1.6))  # runs into the next
    assert codes(runs) == {"G3.overlap"}
    allow = dataclasses.replace(EVERY_SECOND, concurrency_policy="allow")
    assert codes(runs, (allow,)) == set()


def test_g3_a_run_still_open_overlaps_everything_after_it() -> None:
    runs = clean_runs()
    runs[0] = dataclasses.replace(runs[0], id=1, finished_at=None, state="running")
    found = check([EVERY_SECOND], runs, LEADERS, WINDOW)
    assert sorted(v.code for v in found.violations) == ["G3.overlap"] * 9 + ["G4.unsettled"]


def test_g3_uses_the_audited_running_intervals_when_given() -> None:
    """Soak seed 42: a claim that waited for the previous finish is stamped 146 us before it (now())."""
    runs = clean_runs()
    a, b = runs[4], runs[5]
    runs[4] = dataclasses.replace(a, started_at=b.scheduled_for - s(0.003), finished_at=b.scheduled_for + s(0.028778))
    runs[5] = dataclasses.replace(b, started_at=b.scheduled_for + s(0.028632), finished_at=b.scheduled_for + s(0.06))
    assert codes(runs) == {"G3.overlap"}  # the ledger's own timestamps overlap
    audited: dict[int, tuple[datetime, datetime | None]] = {
        r.id: (r.started_at, r.finished_at) for r in runs if r.started_at is not None
    }
    audited[runs[5].id] = (b.scheduled_for + s(0.0290), b.scheduled_for + s(0.0601))  # after the finish
    assert not check([EVERY_SECOND], runs, LEADERS, WINDOW, running=audited).violations
    audited[runs[5].id] = (b.scheduled_for + s(0.0287), b.scheduled_for + s(0.0601))  # really overlapping
    assert check([EVERY_SECOND], runs, LEADERS, WINDOW, running=audited).codes() == {"G3.overlap": 1}


def test_g4_queued_or_running_after_settling_is_reported_but_not_past_the_window() -> None:
    runs = clean_runs()
    runs[6] = dataclasses.replace(runs[6], state="running", finished_at=None)
    runs[7] = dataclasses.replace(runs[7], state="queued", started_at=None, finished_at=None)
    assert codes(runs) >= {"G4.unsettled"}
    assert check([EVERY_SECOND], runs, LEADERS, WINDOW).codes()["G4.unsettled"] == 2
    later = dataclasses.replace(runs[7], id=50, scheduled_for=WINDOW[1] + s(1), due_at=WINDOW[1] + s(1))
    assert codes([*clean_runs(), later]) == set()


def test_g4_a_failed_run_needs_an_error_and_its_retry() -> None:
    runs = clean_runs()
    runs[1] = dataclasses.replace(runs[1], state="failed", error=None)
    assert codes(runs) == {"G4.failed_without_error"}
    runs[1] = dataclasses.replace(runs[1], error="executor lost")
    assert codes(runs) == set()
    retrying = dataclasses.replace(EVERY_SECOND, max_retries=1)
    assert codes(runs, (retrying,)) == {"G4.not_retried"}
    retry = dataclasses.replace(runs[1], id=77, attempt=2, trigger="retry", state="completed", error=None)
    ended = runs[1].scheduled_for + s(0.6)
    retry = dataclasses.replace(retry, started_at=ended, finished_at=ended + s(0.2))
    assert codes([*runs, retry], (retrying,)) == set()


def test_g5_a_run_created_by_an_epoch_after_its_successor_began_is_reported() -> None:
    runs = clean_runs()
    stale = runs[7]  # tick T0+8, after epoch 2 began at T0+5
    runs[7] = dataclasses.replace(stale, epoch=1)
    report = check([EVERY_SECOND], runs, LEADERS, WINDOW)
    assert report.codes() == {"G5.stale_epoch": 1}
    assert report.violations[0].rows == (runs[7],)


def test_a_run_started_before_its_tick_is_reported() -> None:
    runs = clean_runs()
    runs[3] = dataclasses.replace(runs[3], started_at=runs[3].scheduled_for - s(0.001))
    assert codes(runs) == {"early_start"}


def test_a_retry_started_before_its_backoff_ended_is_reported() -> None:
    runs = clean_runs()
    runs[3] = dataclasses.replace(runs[3], attempt=2, trigger="retry", due_at=runs[3].scheduled_for + s(0.5))
    runs.append(dataclasses.replace(clean_runs()[3], id=40, state="failed", error="boom", finished_at=None))
    runs[-1] = dataclasses.replace(
        runs[-1], started_at=runs[3].scheduled_for, finished_at=runs[3].scheduled_for + s(0.05)
    )
    assert codes(runs) == {"early_start"}


def test_http_a_completed_run_must_have_been_delivered_and_a_delivery_must_have_a_run() -> None:
    hook = dataclasses.replace(EVERY_SECOND, kind="http")
    runs = clean_runs(hook)
    every = tuple(Delivery(0, "/hook", *delivery_key(r)) for r in runs)
    assert every[0].idempotency_key == "1:2026-01-01T12:00:01+00:00" and every[0].attempt == "1"
    assert codes(runs, (hook,), every) == set()
    assert codes(runs, (hook,), every[1:]) == {"http.undelivered"}
    phantom = Delivery(0, "/hook", "1:2026-01-01T12:00:01+00:00", "2")
    assert codes(runs, (hook,), (*every, phantom)) == {"http.phantom_delivery"}


def test_http_a_tick_attempt_delivered_twice_is_reported() -> None:
    once = (Delivery(0, "/hook", "1:a", "1"), Delivery(0, "/hook", "1:a", "2"), Delivery(0, "/hook", "1:b", "1"))
    assert codes(clean_runs(), deliveries=once) == set()
    twice = (*once, Delivery(1, "/hook", "1:a", "1"))
    assert codes(clean_runs(), deliveries=twice) == {"http.duplicate_delivery"}
    assert codes(clean_runs(), deliveries=(Delivery(0, "/", None, None),)) == {"http.no_idempotency_key"}


# --- the reference tick matcher ---


def test_matcher_fields_steps_ranges_lists() -> None:
    m = Matcher("*/15 5-6 1,13 * * *")
    assert m.matches(datetime(2026, 1, 1, 13, 5, 45, tzinfo=UTC))
    assert not m.matches(datetime(2026, 1, 1, 13, 5, 46, tzinfo=UTC))
    assert not m.matches(datetime(2026, 1, 1, 14, 5, 45, tzinfo=UTC))
    five = Matcher("30 2 * * 1")  # 5 fields: second 0, Mondays
    assert five.matches(datetime(2026, 1, 5, 2, 30, 0, tzinfo=UTC))  # a Monday
    assert not five.matches(datetime(2026, 1, 6, 2, 30, 0, tzinfo=UTC))
    assert not five.matches(datetime(2026, 1, 5, 2, 30, 1, tzinfo=UTC))


def test_expected_ticks_is_exclusive_of_after_and_inclusive_of_until() -> None:
    ticks = expected_ticks("*/2 * * * * *", "UTC", T0, T0 + s(6))
    assert ticks == [T0 + s(2), T0 + s(4), T0 + s(6)]
    assert expected_ticks("* * * * * *", "UTC", T0 + s(0.5), T0 + s(2.5)) == [T0 + s(1), T0 + s(2)]


@pytest.mark.parametrize("bad", ["* * * *", "61 * * * * *", "*/0 * * * * *"])
def test_matcher_rejects_what_it_does_not_understand(bad: str) -> None:
    with pytest.raises(ValueError):
        Matcher(bad)
