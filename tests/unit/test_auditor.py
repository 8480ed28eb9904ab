"""The auditor's pure reconciliation: which scheduled ticks the ledger does not hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dispatcher.auditor import AuditedJob, reconcile

T0 = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)


def _job(job_id: int, expression: str, created: datetime = T0 - timedelta(days=1), tz: str = "UTC") -> AuditedJob:
    return AuditedJob(job_id, expression, tz, created)


def test_every_tick_found_leaves_nothing_unaccounted() -> None:
    window = (T0, T0 + timedelta(minutes=10))
    ticks = {(1, T0 + timedelta(minutes=m)) for m in range(1, 11)}
    result = reconcile([_job(1, "* * * * *")], ticks, window)
    assert (result.jobs, result.expected, result.unaccounted) == (1, 10, [])


def test_a_missing_tick_is_named_and_ticks_before_creation_are_not_expected() -> None:
    window = (T0, T0 + timedelta(minutes=10))
    created = T0 + timedelta(minutes=5, seconds=30)
    found = {(2, T0 + timedelta(minutes=m)) for m in (6, 7, 9, 10)}
    result = reconcile([_job(2, "* * * * *", created)], found, window)
    assert result.expected == 5
    assert result.unaccounted == [(2, T0 + timedelta(minutes=8))]


def test_the_spring_gap_is_expected_as_the_schedule_has_it() -> None:
    # Berlin springs forward at 01:00 UTC on 2026-03-29: 02:30 local does not exist and fires
    # once right after the gap (03:00 local = 01:00 UTC) — the auditor expects what the leader wrote.
    window = (T0, T0 + timedelta(hours=3))
    result = reconcile([_job(3, "30 2 * * *", tz="Europe/Berlin")], set(), window)
    assert result.expected == 1 and result.unaccounted == [(3, T0 + timedelta(hours=1))]


def test_a_stored_expression_the_parser_refuses_is_left_out() -> None:
    result = reconcile([_job(4, "not a cron")], set(), (T0, T0 + timedelta(hours=1)))
    assert (result.jobs, result.expected) == (0, 0)
