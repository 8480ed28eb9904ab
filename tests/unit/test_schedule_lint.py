"""Schedule warnings (cronos.schedule_lint): each one names a fact the fire times confirm."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronos.schedule import parse_schedule
from cronos.schedule_lint import Code, edit_diff, herd_warning, lint

NOW = datetime(2026, 1, 10, tzinfo=UTC)


def codes(expression: str, timezone: str = "UTC") -> list[str]:
    return [w.code for w in lint(expression, timezone, NOW)]


@pytest.mark.parametrize(
    ("expression", "timezone", "expected"),
    [
        ("*/90 * * * *", "UTC", [Code.STEP_EXCEEDS_FIELD]),
        ("*/90 * * * * *", "UTC", [Code.STEP_EXCEEDS_FIELD]),
        ("0 */30 * * *", "UTC", [Code.STEP_EXCEEDS_FIELD]),
        ("*/7 * * * *", "UTC", [Code.STEP_UNEVEN]),
        ("0 */5 * * *", "UTC", [Code.STEP_UNEVEN]),
        ("0 0 31 * *", "UTC", [Code.DAY_SKIPS_MONTHS]),
        ("0 0 30 * *", "UTC", [Code.DAY_SKIPS_MONTHS]),
        ("0 0 29 2 *", "UTC", [Code.DAY_SKIPS_MONTHS]),
        ("0 9 1-7 * 1", "UTC", [Code.DAYS_ORED]),
        ("0 0 */2 * 1", "UTC", [Code.DAYS_ANDED]),
        ("30 0-23 * * *", "Europe/Berlin", [Code.DST_HOURS_NOT_STAR]),
        ("30 2 * * *", "Europe/Berlin", [Code.DST_GAP, Code.DST_FOLD]),
        ("*/15 2 * * *", "Europe/Berlin", [Code.DST_GAP, Code.DST_FOLD]),
        # None: what they say is what they do.
        ("*/5 * * * *", "UTC", []),
        ("0 0 L * *", "UTC", []),
        ("0 0 28 * *", "UTC", []),
        ("0 0 31 * 1", "UTC", [Code.DAYS_ORED]),  # ORed with Mondays: runs every month
        ("30 * * * *", "Europe/Berlin", []),  # follows real time: its cadence is unchanged
        ("30 0-23 * * *", "UTC", []),
        ("30 1 * * *", "Europe/Berlin", []),
        ("@never", "UTC", []),
        ("@daily", "America/New_York", []),
    ],
)
def test_warnings(expression: str, timezone: str, expected: list[str]) -> None:
    assert codes(expression, timezone) == expected


def test_every_warning_has_a_message_and_the_step_one_suggests_an_interval() -> None:
    [warning] = lint("*/90 * * * *", "UTC", NOW)
    assert "minute 0 of every hour" in warning.message and warning.suggestion is not None
    assert "every: 90m" in warning.suggestion
    [ored] = lint("0 9 1-7 * 1", "UTC", NOW)
    assert ored.suggestion is not None and "`0 9 * * 1#1`" in ored.suggestion
    [hours] = lint("30 0-23 * * *", "Europe/Berlin", NOW)
    assert hours.suggestion is not None and "`30 * * * *`" in hours.suggestion


def test_the_gap_warning_names_the_day_and_what_fires() -> None:
    gap, fold = lint("30 2 * * *", "Europe/Berlin", NOW)
    assert "2026-03-29" in gap.message and "once at 03:00" in gap.message
    assert "2026-10-25" in fold.message and "once, on the first pass" in fold.message
    # What the warnings say is what the scheduler does on those days.
    fires = parse_schedule("30 2 * * *", "Europe/Berlin").fire_times(
        datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 30, 12, tzinfo=UTC)
    )
    assert fires[0] == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST, the end of the gap


@settings(max_examples=200, deadline=None)
@given(
    minute=st.one_of(st.integers(1, 200).map(lambda n: f"*/{n}"), st.integers(0, 59).map(str)),
    hour=st.one_of(st.just("*"), st.integers(1, 40).map(lambda n: f"*/{n}")),
)
def test_step_warnings_agree_with_fire_times(minute: str, hour: str) -> None:
    """A step warning exactly when the gaps between fire times are not the one cadence the step reads as."""
    expression = f"{minute} {hour} * * *"
    fires = parse_schedule(expression).fire_times(NOW, NOW + timedelta(days=3), limit=200)
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(fires)}
    found = set(codes(expression))
    for token, unit in ((minute, 60), (hour, 3600)):
        if not token.startswith("*/"):
            continue
        step, cycle = int(token[2:]), 60 if unit == 60 else 24
        if step >= cycle:
            assert Code.STEP_EXCEEDS_FIELD in found
        elif cycle % step:
            assert Code.STEP_UNEVEN in found
    if not found and minute.startswith("*/") and hour == "*":
        assert gaps == {int(minute[2:]) * 60}  # no warning: the cadence the step reads as is real


def test_herd_counts_the_busiest_minute_of_the_job() -> None:
    t = datetime(2026, 1, 10, 3, 0, tzinfo=UTC)
    starts = {t: 99, t + timedelta(hours=1): 5}
    warning = herd_warning([t, t + timedelta(hours=1)], starts, 100)
    assert warning is not None and warning.code == Code.HERD and "100 active jobs" in warning.message
    assert herd_warning([t], starts, 100, counted=True) is None  # 99 with itself: under the threshold
    assert herd_warning([t + timedelta(minutes=7)], starts, 100) is None


def test_edit_diff_lists_added_and_removed_ticks() -> None:
    old, new = parse_schedule("0 * * * *"), parse_schedule("0 */2 * * *")
    diff = edit_diff(old, new, NOW, NOW + timedelta(days=1), cap=100)
    assert diff.added == [] and len(diff.removed) == 12 and diff.kept == 12 and not diff.more
    assert all(t.hour % 2 == 1 for t in diff.removed)
    capped = edit_diff(new, old, NOW, NOW + timedelta(days=1), cap=5)
    assert len(capped.added) == 5 and capped.more
