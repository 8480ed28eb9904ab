"""cronos.backfill: the ticks of a range as the schedule was then, the choice per mode, attempts and pace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest

from cronos import backfill
from cronos.backfill import TickFacts
from cronos.errors import Conflict, InvalidInput, TooManyRequests
from cronos.models import RUN_STATES
from cronos.ticks import Segment

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _seg(start: datetime | None, end: datetime | None, status: str, expr: str = "0 * * * *") -> Segment:
    return Segment(start=start, end=end, revision=1, status=status, cron_expression=expr, timezone="UTC")  # type: ignore[arg-type]


def test_ticks_follow_each_revisions_schedule_and_leave_out_those_before_creation() -> None:
    created, changed = T0 + 2 * HOUR + timedelta(minutes=5), T0 + 5 * HOUR + timedelta(minutes=5)
    segs = [
        _seg(None, created, "absent"),
        _seg(created, changed, "paused"),
        _seg(changed, None, "active", "30 * * * *"),
    ]
    got = backfill.ticks(segs, T0, T0 + 8 * HOUR, now=T0 + 7 * HOUR + timedelta(minutes=40))
    assert got == [T0 + 3 * HOUR, T0 + 4 * HOUR, T0 + 5 * HOUR] + [
        T0 + h * HOUR + timedelta(minutes=30) for h in (5, 6, 7)
    ]
    # [from, to): `to` itself is left out, `from` is in
    assert backfill.ticks(segs, T0 + 3 * HOUR, T0 + 4 * HOUR, now=T0 + 9 * HOUR) == [T0 + 3 * HOUR]


def test_a_range_over_the_limit_is_refused_naming_it() -> None:
    segs = [_seg(None, T0, "absent", "* * * * * *"), _seg(T0, None, "active", "* * * * * *")]
    with pytest.raises(InvalidInput, match="10000 ticks") as caught:
        backfill.ticks(segs, T0, T0 + timedelta(hours=3), now=T0 + timedelta(days=1))
    assert caught.value.field == "$.to"
    assert len(backfill.ticks(segs, T0, T0 + timedelta(seconds=10_000), now=T0 + timedelta(days=1))) == 9_999


def test_check_range() -> None:
    with pytest.raises(InvalidInput, match="after `from`") as caught:
        backfill.check_range(T0, T0, T0 + HOUR)
    assert caught.value.field == "$.to"  # the body's fields, as every other 422 names them
    with pytest.raises(InvalidInput) as caught:
        backfill.check_range(T0 + 2 * HOUR, T0 + 3 * HOUR, T0 + HOUR)
    assert caught.value.field == "$.from"


def _facts(tick: datetime, attempt: int, state: str, started: bool, unfinished: tuple[int, ...] = ()) -> TickFacts:
    return TickFacts(scheduled_for=tick, last_attempt=attempt, last_state=state, started=started, unfinished=unfinished)  # type: ignore[arg-type]


TICKS = [T0 + h * HOUR for h in range(6)]
FACTS = {
    TICKS[1]: _facts(TICKS[1], 1, "completed", True),
    TICKS[2]: _facts(TICKS[2], 2, "failed", True),
    TICKS[3]: _facts(TICKS[3], 1, "skipped", False),
    TICKS[4]: _facts(TICKS[4], 1, "running", True, (44,)),
    TICKS[5]: _facts(TICKS[5], 1, "queued", False, (45,)),
}


@pytest.mark.parametrize(
    ("mode", "chosen"),
    [("missing", [0, 3, 5]), ("failed", [2]), ("all", [0, 1, 2, 3, 4, 5])],
)
def test_each_mode_chooses_its_ticks(mode: backfill.Mode, chosen: list[int]) -> None:
    got = backfill.select(7, mode, TICKS, FACTS, T0 + 9 * HOUR, 2.0)
    assert [t.scheduled_for for t in got] == [TICKS[i] for i in chosen]


def test_attempts_states_busy_ticks_and_pace() -> None:
    now = T0 + 9 * HOUR
    got = {t.scheduled_for: t for t in backfill.select(7, "all", TICKS, FACTS, now, 4.0)}
    assert [(got[t].state, got[t].attempt, got[t].action) for t in TICKS] == [
        ("none", 1, "queue"), ("completed", 2, "queue"), ("failed", 3, "queue"), ("skipped", 2, "queue"),
        ("running", 2, "busy"), ("queued", 2, "busy"),
    ]  # fmt: skip
    # paced: 1/pace apart from now, in tick order, the busy ones taking no slot
    assert [got[t].due_at for t in TICKS[:4]] == [now + timedelta(seconds=0.25 * i) for i in range(4)]
    assert got[TICKS[4]].due_at is None and got[TICKS[5]].due_at is None


def test_ticks_before_the_job_existed_count_for_nothing_and_a_tiny_pace_is_bounded() -> None:
    created = T0 + timedelta(days=400)
    segs = [_seg(None, created, "absent", "* * * * * *"), _seg(created, None, "active", "0 0 * * *")]
    # a range of years before the job: not "more than 10000 ticks", just its own few
    assert backfill.ticks(segs, T0, created + timedelta(days=3), now=created + timedelta(days=9)) == [
        created.replace(hour=0) + timedelta(days=d) for d in (1, 2)
    ]
    got = backfill.select(7, "all", [T0, T0 + HOUR], {}, T0, 1e-300)
    assert got[1].due_at == T0 + timedelta(seconds=1 / backfill.MIN_PACE_PER_S)


LIMITS = backfill.Limits(max_runs=2, max_per_s=20.0, max_active_per_job=1, max_active_per_caller=3)


def test_the_pace_is_held_to_the_limit_and_a_faster_one_is_refused() -> None:
    assert backfill.pace_of(None, None, 2000.0, LIMITS) == 20.0  # the catch-up default, held
    assert backfill.pace_of(None, 5.0, 2000.0, LIMITS) == 5.0  # the job's own catch-up pace
    assert backfill.pace_of(20.0, None, 2000.0, LIMITS) == 20.0
    with pytest.raises(InvalidInput) as caught:
        backfill.pace_of(20.5, None, 2000.0, LIMITS)
    assert caught.value.field == "$.pace" and "CRONOS_BACKFILL_MAX_PER_S" in caught.value.message


def test_runs_past_the_limit_are_refused_and_busy_ticks_do_not_count() -> None:
    chosen = backfill.select(1, "all", [T0, T0 + HOUR, T0 + 2 * HOUR], {}, T0 + 3 * HOUR, 1.0)
    with pytest.raises(InvalidInput) as caught:
        backfill.check_runs(chosen, LIMITS)
    assert caught.value.field == "$.to" and "3 runs" in caught.value.message
    busy = TickFacts(scheduled_for=T0, last_attempt=1, last_state="running", started=True, unfinished=(7,))
    chosen = backfill.select(1, "all", [T0, T0 + HOUR, T0 + 2 * HOUR], {T0: busy}, T0 + 3 * HOUR, 1.0)
    backfill.check_runs(chosen, LIMITS)
    assert backfill.until(chosen) == T0 + 3 * HOUR + timedelta(seconds=1)  # its last run's release


def test_crowding_names_the_job_limit_first_then_the_callers() -> None:
    backfill.check_crowding(0, 2, LIMITS)
    with pytest.raises(Conflict, match="CRONOS_BACKFILL_MAX_ACTIVE_PER_JOB"):
        backfill.check_crowding(1, 3, LIMITS)
    with pytest.raises(TooManyRequests, match="CRONOS_BACKFILL_MAX_ACTIVE_PER_TOKEN"):
        backfill.check_crowding(0, 3, LIMITS)


def test_runs_of_a_job_that_waits_queue_behind_the_first() -> None:
    assert backfill.to_wait("forbid", [4, 5, 6]) == [5, 6]
    assert backfill.to_wait("buffer_all", [4, 5]) == [5]
    assert backfill.to_wait("forbid", [4]) == [] and backfill.to_wait("forbid", []) == []
    for policy in ("allow", "replace", "buffer_one"):  # they run at once, or skip what overlaps
        assert backfill.to_wait(policy, [4, 5, 6]) == []


def test_a_tick_s_state_is_none_or_a_run_state() -> None:
    assert get_args(backfill.TickState) == ("none", *RUN_STATES)
