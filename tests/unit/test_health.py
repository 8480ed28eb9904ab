"""The pure health decisions (cronos.health): events from facts, each once, and the verdict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronos.events import JobEventKind as K
from cronos.health import (
    Ended,
    Health,
    RunFact,
    Success,
    announced,
    dry_spell,
    judge_runs,
    missed,
    outcomes,
    overrun_limit_s,
    verdict,
)
from cronos.metrics import job_allowed as allowed
from cronos.models import Expectations
from dispatcher.health import like_patterns

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def failed(run_id: int, s: float, *, retried: bool = False) -> Ended:
    return Ended(run_id, 1, "failed", at(s - 1), 1, at(s), error="boom", retried=retried)


def kinds(events: list) -> list[tuple[str, int | None]]:  # type: ignore[type-arg]
    return [(str(e.kind), e.run_id) for e in events]


def test_failures_count_a_streak_and_the_first_success_after_it_recovers() -> None:
    row, events = outcomes(Health(1), [failed(1, 10, retried=True), failed(2, 20), failed(3, 30)], None)
    assert kinds(events) == [("failed", 2), ("failed", 3)], "a failure with a retry left is no event"
    assert [e.detail["consecutive_failures"] for e in events] == [1, 2]
    assert (row.consecutive_failures, row.last_failure_run_id) == (2, 3)

    again, none = outcomes(row, [failed(2, 20), failed(3, 30)], None)  # the overlap re-read
    assert (again, none) == (row, [])
    healed, events = outcomes(row, [], Success(9, at(40)))
    assert kinds(events) == [("recovered", 9)] and events[0].detail == {"after_failures": 2}
    assert (healed.consecutive_failures, healed.last_success_at) == (0, at(40))
    assert outcomes(healed, [], Success(9, at(40))) == (healed, []), "recovered once"


def test_a_success_between_failures_of_one_pass_ends_the_first_streak() -> None:
    row, events = outcomes(Health(1, consecutive_failures=1, last_failure_at=at(5), last_failure_run_id=1),
                           [failed(2, 10), failed(4, 30)], Success(3, at(20)))  # fmt: skip
    assert kinds(events) == [("failed", 2), ("recovered", 3), ("failed", 4)]
    assert [e.detail.get("consecutive_failures") for e in events] == [2, None, 1]
    assert row.consecutive_failures == 1 and row.last_success_at == at(20)


def test_skips_but_an_edits_and_cancellations_are_events_and_a_replaced_run_is_no_failure() -> None:
    ended = [
        Ended(1, 1, "skipped", at(1), 1, at(1), skip_reason="previous run still running"),
        Ended(2, 1, "skipped", at(2), 1, at(2), skip_reason="schedule changed"),
        Ended(3, 1, "skipped", at(3), 1, at(3), skip_reason="job paused or deleted"),
        Ended(4, 1, "cancelled", at(4), 1, at(4), error="cancelled by alice"),
    ]
    ended.append(Ended(5, 1, "failed", at(5), 1, at(5), error="replaced"))  # its replace policy
    row, events = outcomes(Health(1), ended, None)
    assert kinds(events) == [("skipped", 1), ("cancelled", 4)] and row.consecutive_failures == 0
    assert events[0].detail["reason"] == "previous run still running" and events[1].dedupe_key == "cancelled:4"


def fact(
    run_id: int, state: str, tick: float, start: float | None, took: float | None, exp: Expectations | None
) -> RunFact:
    started = None if start is None else at(start)
    finished = None if started is None or took is None or state == "running" else started + timedelta(seconds=took)
    return RunFact(run_id, state, at(tick), 1, started, finished, took if finished else None, exp)


def test_runs_are_judged_against_their_expectations_and_the_watermark_stops_at_an_open_run() -> None:
    exp = Expectations(start_within_s=5, finish_within_s=10, not_faster_than_s=1)
    runs = [
        fact(1, "completed", 0, 1, 2, exp),  # fine
        fact(2, "completed", 10, 30, 2, exp),  # late by 20 s
        fact(3, "completed", 20, 21, 0.5, exp),  # too fast
        fact(4, "failed", 30, 31, 12, exp),  # overran (ended)
        fact(5, "running", 40, 41, None, exp),  # still running, 19 s by `now`
        fact(6, "queued", 50, None, None, exp),  # waiting 10 s past its tick: late already
        fact(7, "completed", 51, 52, 2, Expectations()),  # planned before any expectation
    ]
    row, events, late = judge_runs(Health(1), runs, at(60))
    assert sorted(kinds(events)) == sorted(
        [("late_start", 2), ("too_fast", 3), ("overran", 4), ("overran", 5), ("late_start", 6)]
    )
    assert late and row.judged_run_id == 4 and row.last_success_at == at(54)
    waiting = next(e for e in events if e.run_id == 6)
    assert waiting.detail["started"] is False and waiting.detail["delay_s"] == 10
    assert next(e for e in events if e.run_id == 5).occurred_at == at(51), "at the instant it crossed the limit"


def test_no_success_once_per_dry_spell_counted_from_the_last_success_or_change() -> None:
    exp = Expectations(success_every_s=60)
    assert dry_spell(Health(1), exp, at(0), at(59)) is None
    spell = dry_spell(Health(1), exp, at(0), at(61))
    assert spell is not None and spell.kind == K.NO_SUCCESS and spell.occurred_at == at(60)
    assert dry_spell(Health(1), exp, at(0), at(500)) == spell, "the same spell: the same fact"
    assert dry_spell(Health(1, last_success_at=at(100)), exp, at(0), at(150)) is None
    assert dry_spell(Health(1), exp, at(1000), at(1030)) is None, "an edit (a resume) starts the period anew"
    assert dry_spell(Health(1), None, at(0), at(1000)) is None


def test_the_verdict_names_the_worst_and_why() -> None:
    assert verdict(Health(1)) == ("unknown", "no run has finished yet")
    ok = Health(1, last_success_at=at(0))
    assert verdict(ok)[0] == "ok"
    assert verdict(ok, late=True)[0] == "late"
    assert verdict(ok, dry=True)[0] == "missing"
    assert verdict(Health(1, last_success_at=at(0), missed_at=at(10)))[0] == "missing"
    assert verdict(Health(1, last_success_at=at(20), missed_at=at(10)))[0] == "ok", "a success since the missed tick"
    assert verdict(Health(1, consecutive_failures=3), late=True) == ("failing", "the last 3 runs failed")
    assert verdict(Health(1, consecutive_failures=3), overrunning=True)[0] == "overrunning"


def test_missed_ticks_and_overrun_limits() -> None:
    event = missed(7, at(30))
    assert (event.kind, event.dedupe_key, event.run_id) == (K.MISSED, f"missed:7:{at(30).isoformat()}", None)
    assert overrun_limit_s(Expectations(finish_within_s=30), 300) == 30
    assert overrun_limit_s(None, 300) == overrun_limit_s(Expectations(), 300) == 305


def test_the_metrics_allow_list_takes_names_and_globs() -> None:
    assert allowed("billing-nightly", []) and allowed("billing-nightly", ["billing-*"])
    assert not allowed("reports", ["billing-*", "etl"])
    assert like_patterns(["billing-*", "a_b%?"]) == ["billing-%", "a\\_b\\%_"]


def test_run_events_are_the_kinds_asked_of_what_happened_after_since() -> None:
    runs = [
        fact(1, "completed", 0, 1, 2, None),  # started and ended before `since`: nothing
        fact(2, "failed", 4, 5, 10, None),  # started before, ended after: its end only
        fact(3, "running", 10, 11, None, None),  # started after, still running: its start
        fact(4, "cancelled", 12, 13, 1, None),  # started and ended after
        fact(5, "skipped", 14, None, None, None),  # never started: no run event (`skipped` is its own)
        fact(6, "queued", 15, None, None, None),
    ]
    every = announced(1, runs, {"started", "completed", "ended"}, at(10))
    assert kinds(every) == [("ended", 2), ("started", 3), ("started", 4), ("ended", 4)]
    assert every[0].detail == {"scheduled_for": at(4).isoformat(), "attempt": 1, "state": "failed", "duration_s": 10}
    assert every[1].dedupe_key == "started:3" and every[1].occurred_at == at(11)
    done = [fact(7, "completed", 20, 21, 3, None)]
    assert kinds(announced(1, done, {"completed"}, at(10))) == [("completed", 7)]
    assert kinds(announced(1, done, {"ended", "started"}, at(10))) == [("started", 7), ("ended", 7)]
    assert announced(1, runs + done, set(), at(0)) == []
