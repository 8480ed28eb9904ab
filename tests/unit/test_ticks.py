"""cronos.ticks (pure): the ticks of a job's history and their outcomes; the route's window and DST notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.bodies import encode_cursor
from api.routes_ticks import MAX_WINDOW, annotate, cursor_after, cursor_of, window
from cronos.errors import InvalidInput
from cronos.models import SKIP_JOB_INACTIVE, SKIP_MISFIRED, SKIP_SCHEDULE_CHANGED
from cronos.ticks import (
    BEFORE_CREATED,
    CANCELLED,
    DELETED,
    NOT_DUE,
    NOT_WRITTEN,
    PAUSED,
    RETENTION,
    RUNS_DELETED,
    UNACCOUNTED,
    LedgerRow,
    Segment,
    Tick,
    account,
    plan,
    segments,
)

US = timedelta(microseconds=1)


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 5, 4, 10, 0, tzinfo=UTC) + timedelta(minutes=minute, seconds=second)


@dataclass
class Rev:
    number: int
    at: datetime
    status: str
    changes: dict[str, Any] = field(default_factory=dict)


# Every minute from 10:00:30; paused 10:05:30, resumed 10:10:30; every two minutes from 10:15:30;
# deleted 10:20:30.
HISTORY = [
    Rev(1, at(0, 30), "active", {"cron_expression": "* * * * *", "timezone": "UTC", "name": "a"}),
    Rev(2, at(5, 30), "paused", {"status": "paused"}),
    Rev(3, at(10, 30), "active", {"status": "active"}),
    Rev(4, at(15, 30), "active", {"cron_expression": "*/2 * * * *"}),
    Rev(5, at(20, 30), "deleted", {}),
]


def _plan(history: list[Rev], start: datetime, until: datetime, limit: int = 1000) -> list[tuple[datetime, Segment]]:
    return plan(segments(history), start - US, until, limit)


def test_segments_fold_each_revision_over_the_ones_before() -> None:
    segs = segments(HISTORY)
    assert [(s.revision, s.status, s.cron_expression) for s in segs] == [
        (1, "absent", "* * * * *"), (1, "active", "* * * * *"), (2, "paused", "* * * * *"),
        (3, "active", "* * * * *"), (4, "active", "*/2 * * * *"), (5, "deleted", "*/2 * * * *"),
    ]  # fmt: skip
    assert (segs[0].start, segs[0].end) == (None, at(0, 30))
    assert (segs[2].start, segs[2].end) == (at(5, 30), at(10, 30))
    assert (segs[-1].start, segs[-1].end) == (at(20, 30), None)


def test_ticks_follow_each_segments_schedule_and_status() -> None:
    planned = _plan(HISTORY, at(-2), at(23))
    ticks = account(planned, [], segments(HISTORY), now=at(30), written_until=at(20, 30))
    got = [(t.scheduled_for, t.revision, t.outcome, t.reason) for t in ticks]
    expect = [(at(m), 1, "none", BEFORE_CREATED) for m in (-2, -1, 0)]
    expect += [(at(m), 1, "none", UNACCOUNTED) for m in range(1, 6)]
    expect += [(at(m), 2, "none", PAUSED) for m in range(6, 11)]
    expect += [(at(m), 3, "none", UNACCOUNTED) for m in range(11, 16)]
    expect += [(at(m), 4, "none", UNACCOUNTED) for m in (16, 18, 20)]
    expect += [(at(22), 5, "none", DELETED)]
    assert got == expect


def _row(run_id: int, tick: datetime, state: str, *, attempt: int = 1, revision: int = 1, **extra: Any) -> LedgerRow:
    trigger = "schedule" if attempt == 1 else "retry"
    fields: dict[str, Any] = {"started_at": None, "skip_reason": None, **extra}
    return LedgerRow(id=run_id, scheduled_for=tick, attempt=attempt, trigger=trigger,  # type: ignore[arg-type]
                     revision=revision, state=state, **fields)  # fmt: skip


def test_outcomes_come_from_the_ledger_and_say_why_when_it_has_no_row() -> None:
    history = HISTORY[:4]  # not deleted
    rows = [
        _row(1, at(1), "completed", started_at=at(1, 0) + timedelta(milliseconds=250)),
        _row(2, at(2), "skipped", skip_reason=SKIP_MISFIRED),
        _row(3, at(3), "failed", started_at=at(3, 1)),
        _row(4, at(3), "queued", attempt=2),
        _row(5, at(4), "queued"),
        _row(6, at(6), "skipped", revision=1, skip_reason=SKIP_JOB_INACTIVE),  # written ahead, then paused
        _row(7, at(17), "skipped", revision=3, skip_reason=SKIP_SCHEDULE_CHANGED),  # the old schedule's
    ]
    planned = _plan(history, at(1), at(22))
    ticks = {t.scheduled_for: t for t in account(planned, rows, segments(history), now=at(19, 10),
                                                  written_until=at(19, 40))}  # fmt: skip
    assert (ticks[at(1)].outcome, ticks[at(1)].runs[0].start_delay_s) == ("ran", 0.25)
    assert (ticks[at(2)].outcome, ticks[at(2)].reason) == ("skipped", SKIP_MISFIRED)
    assert ticks[at(3)].outcome == "ran"
    runs = [(r.attempt, r.state, r.start_delay_s) for r in ticks[at(3)].runs]
    assert runs == [(1, "failed", 1.0), (2, "queued", None)]
    assert (ticks[at(4)].outcome, ticks[at(4)].reason) == ("pending", None)
    assert (ticks[at(5)].outcome, ticks[at(5)].reason) == ("none", UNACCOUNTED)
    assert (ticks[at(6)].outcome, ticks[at(6)].reason) == ("skipped", SKIP_JOB_INACTIVE)
    # A tick only the ledger knows: planned by revision 3, skipped when revision 4 took over.
    assert (ticks[at(17)].outcome, ticks[at(17)].reason, ticks[at(17)].revision) == (
        "skipped", SKIP_SCHEDULE_CHANGED, 3,
    )  # fmt: skip
    assert ticks[at(17)].cron_expression == "* * * * *"
    assert (ticks[at(18)].outcome, ticks[at(18)].reason) == ("none", UNACCOUNTED)
    assert (ticks[at(20)].outcome, ticks[at(20)].reason) == ("pending", NOT_DUE)
    assert list(ticks) == sorted(ticks)


def test_a_due_tick_past_the_cursor_is_not_written_yet_and_a_deleted_jobs_runs_are_gone() -> None:
    segs = segments(HISTORY[:1])
    planned = plan(segs, at(1) - US, at(3), 10)
    ticks = account(planned, [], segs, now=at(3, 30), written_until=at(2))
    assert [(t.outcome, t.reason) for t in ticks] == [("none", UNACCOUNTED), ("none", UNACCOUNTED),
                                                      ("pending", NOT_WRITTEN)]  # fmt: skip
    ticks = account(planned, [], segs, now=at(3, 30), written_until=None)
    assert {t.reason for t in ticks} == {RUNS_DELETED}
    ticks = account(planned, [], segs, now=at(3, 30), written_until=at(2), kept_since=at(1, 30))
    assert [t.reason for t in ticks] == [RETENTION, UNACCOUNTED, NOT_WRITTEN]


def test_plan_stops_at_the_limit_and_skips_a_schedule_that_never_was_valid() -> None:
    assert [t for t, _ in _plan(HISTORY, at(0), at(23), limit=3)] == [at(0), at(1), at(2)]
    broken = [Rev(1, at(0, 30), "active", {"cron_expression": "61 * * * *", "timezone": "UTC"})]
    assert _plan(broken, at(0), at(10)) == []


# --- DST: the dispatcher's fire times, annotated as the schedule preview does -------------------


def test_a_wall_clock_job_in_a_spring_forward_gap_fires_once_after_it_and_says_so() -> None:
    history = [Rev(1, datetime(2026, 3, 27, tzinfo=UTC), "active",
                   {"cron_expression": "30 2 * * *", "timezone": "Europe/Berlin"})]  # fmt: skip
    planned = _plan(history, datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 30, 12, tzinfo=UTC))
    ticks = account(planned, [], segments(history), now=datetime(2026, 4, 1, tzinfo=UTC), written_until=None)
    # 02:30 CET on the 28th, then 02:30 does not exist on the 29th: 03:00 CEST, then 02:30 CEST.
    assert [t.scheduled_for for t in ticks] == [datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
                                                datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
                                                datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]  # fmt: skip
    notes = [annotate(t).dst for t in ticks]
    assert notes[0] is None and notes[2] is None
    assert notes[1] is not None and notes[1].kind == "gap"


def test_a_repeated_wall_time_fires_once_for_an_appointment_and_twice_for_elapsed_time() -> None:
    start, until = datetime(2026, 10, 24, 23, tzinfo=UTC), datetime(2026, 10, 25, 2, tzinfo=UTC)
    for expression, kinds in (("30 2 * * *", ["fold_once"]), ("30 * * * *", [None, "fold_first", "fold_second"])):
        history = [Rev(1, datetime(2026, 10, 1, tzinfo=UTC), "active",
                       {"cron_expression": expression, "timezone": "Europe/Berlin"})]  # fmt: skip
        ticks = account(_plan(history, start, until), [], segments(history), now=until, written_until=until)
        notes = [annotate(t).dst for t in ticks]
        assert [n.kind if n else None for n in notes] == kinds, expression


def test_annotate_keeps_every_field_of_the_tick() -> None:
    tick = Tick(scheduled_for=at(1), outcome="none", reason=PAUSED, revision=2, cron_expression="* * * * *",
                timezone="UTC", runs=[])  # fmt: skip
    out = annotate(tick)
    assert (out.scheduled_for, out.reason, out.revision, out.dst) == (at(1), PAUSED, 2, None)


# --- the window -----------------------------------------------------------------------------------


def test_the_window_defaults_to_the_last_hour_and_is_bounded() -> None:
    now = at(0)
    assert window(None, None, now) == (now - timedelta(hours=1) - US, now)
    after, until = window("2026-05-04T09:00:00Z", "2026-05-04T09:30:00", now)
    assert (after + US, until) == (datetime(2026, 5, 4, 9, tzinfo=UTC), datetime(2026, 5, 4, 9, 30, tzinfo=UTC))
    assert window("2026-04-27T10:00:00Z", None, now)[0] == now - MAX_WINDOW - US  # exactly 7 days
    for raw_from, raw_to, name in (
        ("2026-04-27T09:59:59Z", None, "to"),  # longer than 7 days
        ("2026-05-04T11:00:00Z", None, "from"),  # after `to`
        ("yesterday", None, "from"),
        (None, "soon", "to"),
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "from"),
    ):
        with pytest.raises(InvalidInput) as caught:
            window(raw_from, raw_to, now)
        assert caught.value.field == name, (raw_from, raw_to)


def test_a_cursor_names_its_tick_to_the_microsecond_in_any_year() -> None:
    for tick in (at(1) + 7 * US, datetime(1960, 2, 29, 23, 59, 59, 999999, tzinfo=UTC), datetime(1, 1, 1, tzinfo=UTC)):
        assert cursor_after(cursor_of(tick)) == tick
    assert cursor_after(None) is None
    assert cursor_after(encode_cursor(2**63 - 1)) == datetime.max.replace(tzinfo=UTC)  # past the calendar: the end


def test_a_tick_whose_run_was_cancelled_ran_if_it_started_else_it_was_skipped() -> None:
    history = HISTORY[:4]
    rows = [
        _row(1, at(1), "cancelled", started_at=at(1, 1)),  # stopped while it ran
        _row(2, at(2), "cancelled"),  # cancelled while queued
    ]
    planned = _plan(history, at(1), at(3))
    ticks = {t.scheduled_for: t for t in account(planned, rows, segments(history), now=at(3), written_until=at(3))}
    assert (ticks[at(1)].outcome, ticks[at(1)].reason) == ("ran", None)
    assert (ticks[at(2)].outcome, ticks[at(2)].reason) == ("skipped", CANCELLED)
