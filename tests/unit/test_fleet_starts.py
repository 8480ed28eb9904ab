"""The fleet's planned starts per minute (cronos.fleet_starts): grouped counts, seconds, jitter, the budget."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from cronos.fleet_starts import Group, peaks, starts_per_minute
from cronos.lifecycle import jitter_s

START = datetime(2026, 1, 10, 3, 0, 30, tzinfo=UTC)  # floored to 03:00


def test_a_group_counts_all_its_jobs_at_each_tick() -> None:
    starts = starts_per_minute(
        [Group("0 * * * *", "UTC", 0.0, 4000), Group("*/15 * * * *", "UTC", 0.0, 10)], START, 120
    )
    assert starts.start == START.replace(second=0)
    assert len(starts.counts) == 120 and starts.jobs == 4010 and starts.schedules == 2 and not starts.partial
    assert starts.counts[0] == starts.counts[60] == 4010 and starts.counts[15] == 10 and sum(starts.counts) == 8080
    assert peaks(starts, top=2) == [
        (START.replace(second=0), 4010),
        (START.replace(second=0) + timedelta(hours=1), 4010),
    ]


def test_seconds_are_counted_per_minute_in_one_step() -> None:
    starts = starts_per_minute([Group("*/10 * * * * *", "UTC", 0.0, 2)], START, 3)
    assert starts.counts == [12, 12, 12]  # 6 fires a minute, 2 jobs


def test_a_jittered_job_starts_at_its_tick_plus_the_leaders_jitter() -> None:
    ids = (11, 12, 13)
    starts = starts_per_minute([Group("0 * * * *", "UTC", 1800.0, 3, ids)], START, 120)
    tick = START.replace(second=0)
    expected = [0] * 120
    for t in (tick, tick + timedelta(hours=1)):
        for job_id in ids:
            at = t + timedelta(seconds=jitter_s(job_id, int(t.timestamp() * 1000), 1800.0))
            expected[int((at - tick).total_seconds() // 60)] += 1
    assert starts.counts == expected and max(expected) < 3


def test_the_walk_stops_at_its_budget_and_says_so() -> None:
    groups = [Group(f"{m} * * * *", "UTC", 0.0, 1) for m in range(60)]
    starts = starts_per_minute(groups, START, 24 * 60, budget=500)
    assert starts.partial and sum(starts.counts) < 60 * 24
    assert not starts_per_minute(groups, START, 24 * 60).partial


def test_an_invalid_stored_expression_is_left_out() -> None:
    starts = starts_per_minute([Group("not cron", "UTC", 0.0, 3), Group("@never", "UTC", 0.0, 1)], START, 60)
    assert sum(starts.counts) == 0 and not starts.partial


def test_ten_thousand_jobs_on_a_thousand_schedules_cost_little() -> None:
    groups = [
        Group(f"{m} {h} * * *", "Europe/Berlin", 0.0, 10) for m in range(60) for h in range(0, 24, 24 // 16 or 1)
    ][:1000]
    began = time.perf_counter()
    starts = starts_per_minute(groups, START, 24 * 60)
    assert sum(starts.counts) == 10 * len(groups) and not starts.partial
    assert time.perf_counter() - began < 2.0
