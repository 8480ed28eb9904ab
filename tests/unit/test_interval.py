"""Interval schedules (cronos.interval): ticks are anchor + k·every in elapsed time, whatever the zone.

Property tests over random anchors, intervals and instants, across DST transitions of zones that
move by an hour, by half an hour (Lord Howe) and at midnight (Santiago); then the spelling of a
duration, and the leader's grouping of interval jobs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronos.errors import InvalidInput, InvalidSchedule
from cronos.interval import EPOCH, MAX_S, Interval, canonical, every_seconds, interval_of, spell
from cronos.models import DispatchJob
from cronos.schedule_window import NEVER, job_schedule
from dispatcher.schedule_book import ScheduleBook
from tests.unit.test_planner import simulate

ZONES = ("America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata")
# Instants around DST transitions of those zones (2026), where a wall-clock schedule would move.
TRANSITIONS = (
    datetime(2026, 3, 8, 6, 30, tzinfo=UTC),  # New York springs forward at 07:00Z
    datetime(2026, 11, 1, 5, 30, tzinfo=UTC),  # New York falls back at 06:00Z
    datetime(2026, 3, 29, 0, 30, tzinfo=UTC),  # Berlin springs forward at 01:00Z
    datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # Berlin falls back at 01:00Z
    datetime(2026, 4, 4, 14, 30, tzinfo=UTC),  # Lord Howe falls back half an hour at 15:00Z
    datetime(2026, 9, 6, 3, 30, tzinfo=UTC),  # Santiago springs forward at 04:00Z
)

anchors = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
) | st.just(EPOCH)
everys = st.integers(min_value=1, max_value=MAX_S)
instants = st.datetimes(min_value=datetime(1950, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC))


@given(anchors, everys, instants)
def test_the_next_tick_is_the_first_anchor_plus_k_every_after_the_instant(
    anchor: datetime, every_s: int, after: datetime
) -> None:
    tick = Interval(every_s, anchor).next_after(after)
    step = timedelta(seconds=every_s)
    assert tick > after >= tick - step
    assert (tick - anchor) % step == timedelta(0)  # anchor + k·every, before the anchor too


@settings(max_examples=60)
@given(anchors, st.integers(min_value=1, max_value=6 * 3600), st.sampled_from(ZONES), st.sampled_from(TRANSITIONS))
def test_ticks_across_a_dst_transition_are_every_apart_in_elapsed_time_in_every_zone(
    anchor: datetime, every_s: int, zone: str, near: datetime
) -> None:
    schedule, notice = job_schedule(None, zone, every=spell(every_s), anchor=anchor)
    assert notice is None
    after, until = near - timedelta(hours=3), near + timedelta(hours=3)
    ticks = schedule.fire_times(after, until, 500)
    assert ticks and all(b - a == timedelta(seconds=every_s) for a, b in pairwise(ticks))
    assert all((t - anchor) % timedelta(seconds=every_s) == timedelta(0) for t in ticks)
    utc, _ = job_schedule(None, "UTC", every=spell(every_s), anchor=anchor)
    assert utc.fire_times(after, until, 500) == ticks  # the zone changes how a tick is shown, never when


def test_an_interval_keeps_its_window_and_ends_at_the_calendar() -> None:
    start, end = datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC), datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    schedule, _ = job_schedule(None, "UTC", every="20s", start_at=start, end_at=end)
    assert schedule.fire_times(start - timedelta(days=1), end + timedelta(days=1)) == [
        datetime(2026, 1, 1, 0, 0, s, tzinfo=UTC) for s in (20, 40)
    ] + [end]
    assert schedule.over_after(end) and schedule.next_after(end) == NEVER
    far, _ = job_schedule(None, "UTC", every="366d")
    assert far.next_after(datetime(9999, 8, 15, tzinfo=UTC)) == NEVER  # past year 9999: no tick, no crash


@pytest.mark.parametrize(
    ("raw", "seconds", "spelled"),
    [
        ("90s", 90, "1m30s"), ("90m", 5400, "1h30m"), ("1h30m", 5400, "1h30m"), ("2d", 172_800, "2d"),
        (5400, 5400, "1h30m"), ("5400", 5400, "1h30m"), (1.0, 1, "1s"), ("1d 12h", 129_600, "1d12h"),
        ("366d", MAX_S, "366d"), ("1H", 3600, "1h"),
    ],
)  # fmt: skip
def test_durations_are_read_and_spelled_canonically(raw: Any, seconds: int, spelled: str) -> None:
    assert every_seconds(raw) == seconds and canonical(raw) == spelled and every_seconds(spelled) == seconds


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (0, "at least 1 s"), ("0s", "at least 1 s"), (-5, "at least 1 s"), ("-5m", "not a duration"),
        (0.5, "whole number"), ("1.5h", "not a duration"), ("367d", "at most 366 days"), (MAX_S + 1, "at most"),
        ("", "not a duration"), ("m", "not a duration"), ("90x", "not a duration"), ("30m1h", "not a duration"),
        (True, "must be a duration"), (float("nan"), "whole number"), ("9" * 40, "not a duration"),
    ],
)  # fmt: skip
def test_nonsense_durations_are_refused_naming_the_field(raw: Any, why: str) -> None:
    with pytest.raises(InvalidInput, match=why) as refused:
        every_seconds(raw)
    assert refused.value.field == "$.every"


def test_a_stored_interval_the_checks_refuse_is_an_invalid_schedule_not_a_crash() -> None:
    with pytest.raises(InvalidSchedule):
        interval_of("999999d", None)
    assert interval_of("1h", datetime(2026, 1, 1)).anchor == datetime(2026, 1, 1, tzinfo=UTC)  # naive: UTC


def _job(job_id: int, every: str, zone: str, anchor: datetime | None, cursor: datetime) -> DispatchJob:
    return DispatchJob(
        id=job_id, cron_expression=None, timezone=zone, misfire_policy="run_all", misfire_grace_s=60.0,
        jitter_s=0.0, concurrency_policy="forbid", status="active", cursor=cursor, every=every, anchor=anchor,
    )  # fmt: skip


def test_interval_jobs_with_one_every_and_anchor_share_a_group_whatever_their_zone() -> None:
    t0 = datetime(2026, 3, 8, 6, 0, tzinfo=UTC)  # across New York's spring-forward
    anchor = datetime(2026, 1, 1, 0, 0, 7, tzinfo=UTC)
    jobs = [_job(i, "1h30m", zone, None, t0) for i, zone in enumerate(ZONES, 1)]
    jobs += [_job(10, "90m", "UTC", anchor, t0), _job(11, "1h", "UTC", None, t0)]
    jobs[-2].every = canonical(jobs[-2].every or "")
    book = ScheduleBook()
    book.apply(jobs, ())
    assert book.group_count == 3  # five zones, one schedule; another anchor; another interval
    fired = simulate(jobs, t0, t0 + timedelta(hours=6))
    for job_id in range(1, len(ZONES) + 1):
        assert fired[job_id] == [t0 + timedelta(minutes=90 * k) for k in range(1, 5)]  # 07:30Z, 09:00Z, ...
    assert fired[10] == [datetime(2026, 3, 8, 6, 0, 7, tzinfo=UTC) + timedelta(minutes=90 * k) for k in range(4)]
    assert fired[11] == [t0 + timedelta(hours=k) for k in range(1, 7)]


_FILE = """
jobs:
  - name: sync
    every: 90m
    anchor: "2026-01-01T00:15:00+01:00"
    payload: {action: reindex}
"""


def test_a_jobs_file_spells_the_interval_as_the_api_stores_it() -> None:
    from api.jobs_file import jobs_file_schema
    from cronos.client.apply import Step, plan
    from cronos.client.jobs_file import ApplyInvalid, desired_jobs, parse

    def desired(text: str) -> Any:
        return desired_jobs([("jobs.yaml", parse("jobs.yaml", text))], jobs_file_schema(), {})

    (want,) = desired(_FILE)
    assert want.fields["every"] == "1h30m"
    stored = {**want.fields, "id": 1, "anchor": "2025-12-31T23:15:00Z", "managed_by": {"tool": "cronos-apply"}}
    assert [a.step for a in plan([want], [stored], prune=False, salt=b"s")] == [Step.UNCHANGED]
    (edit,) = plan(desired(_FILE.replace("90m", "2h")), [stored], prune=False, salt=b"s")
    assert (edit.step, edit.body) == (Step.UPDATE, {"every": "2h"})
    for text, field in (
        (_FILE.replace("90m", "0s"), r"\$\.every"),
        (_FILE.replace("every: 90m", "every: 1h\n    cron_expression: '@daily'"), r"\$\.every"),
        (_FILE.replace("every: 90m", "cron_expression: '@daily'"), r"\$\.anchor"),
    ):
        with pytest.raises(ApplyInvalid, match=field):
            desired(text)


def test_the_auditor_expects_an_interval_jobs_ticks_as_the_leader_plans_them() -> None:
    from dispatcher.auditor import AuditedJob, reconcile

    start = datetime(2026, 3, 29, 0, 59, tzinfo=UTC)  # Berlin springs forward at 01:00Z
    job = AuditedJob(id=7, cron_expression=None, timezone="Europe/Berlin", created_at=start, every="20s")
    ticks = [start + timedelta(seconds=20 * k) for k in range(1, 7)]
    result = reconcile([job], {(7, t) for t in ticks if t != ticks[3]}, (start, start + 2 * timedelta(minutes=1)))
    assert (result.jobs, result.expected, result.unaccounted) == (1, 6, [(7, ticks[3])])
