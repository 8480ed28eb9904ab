"""cronos.store.run_views' pure parts: the index a page is read from, the days a range spans, and
where the next page starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from cronos.lifecycle import TERMINAL
from cronos.models import Run, RunState
from cronos.store.run_views import SCAN, UNHAPPY, Path, RunFilter, access_path, day_bounds, next_before


@pytest.mark.parametrize(
    ("wanted", "path"),
    [
        (RunFilter(), Path.ALL),
        (RunFilter(states=("failed",)), Path.UNHAPPY),
        (RunFilter(states=("failed", "skipped"), trigger="manual", queue="q"), Path.UNHAPPY),
        (RunFilter(states=("failed", "completed")), Path.ALL),
        (RunFilter(states=("queued",)), Path.ALL),
        (RunFilter(job_id=3), Path.JOB),
        (RunFilter(job_id=3, states=("skipped",)), Path.UNHAPPY_JOB),
        (RunFilter(job_id=3, states=("running",)), Path.JOB),
    ],
)
def test_the_partial_index_serves_only_unhappy_states(wanted: RunFilter, path: Path) -> None:
    assert access_path(wanted) is path


def test_the_partial_indexes_hold_every_end_state_but_completed() -> None:
    assert {s.value for s in TERMINAL} - {RunState.COMPLETED.value} <= UNHAPPY


def test_day_bounds_are_whole_utc_days_around_the_range() -> None:
    since = datetime(2026, 3, 1, 23, 30, tzinfo=timezone(timedelta(hours=-2)))  # 2026-03-02 01:30 UTC
    until = datetime(2026, 3, 4, 0, 0, tzinfo=UTC)
    assert day_bounds(since, until) == (datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 4, tzinfo=UTC))
    assert day_bounds(None, until + timedelta(microseconds=1)) == (None, datetime(2026, 3, 5, tzinfo=UTC))
    assert day_bounds(None, None) == (None, None)
    first, last = datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert day_bounds(first, last) == (first, None)  # no midnight after the last day: open


def _run(run_id: int) -> Run:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return Run(
        id=run_id, job_id=1, scheduled_for=at, attempt=1, trigger="schedule", revision=1, state="failed",
        due_at=at, node_id=None, epoch=None, started_at=None, finished_at=None, duration_ms=None, error=None,
        skip_reason=None, created_at=None, lease_until=None, traceback=None, result=None,
    )  # fmt: skip


def test_the_next_page_starts_after_a_full_page_or_below_a_full_scan() -> None:
    assert next_before([_run(9), _run(5)], 2, None) == 5
    assert next_before([_run(9)], 2, (SCAN, 3)) == 3  # short page, the scan stopped at its cap
    assert next_before([_run(9)], 2, (SCAN - 1, 3)) is None  # the index had nothing more
    assert next_before([], 2, None) is None
