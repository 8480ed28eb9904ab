"""The circuit breaker's decision (cronos.breaker): pure, over the facts the leader reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronos.breaker import Facts, Hold, Trip, canary_note, counted, holds, note, pause_note, step, threshold, trips
from cronos.models import Breaker, Expectations

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("facts", "threshold", "expected"),
    [
        (Facts("active", 2, None), 3, False),  # below the threshold
        (Facts("active", 3, None), 3, True),  # reaches it
        (Facts("active", 9, T0), 3, True),  # past it (a leader that was away)
        (Facts("paused", 5, None), 3, False),  # paused already: nothing to do
        (Facts("ended", 5, None), 3, False),
        (Facts("active", 5, None), 0, False),  # no breaker
        # Resumed by hand after a trip at a streak of 3: it takes 3 more failures to trip again ...
        (Facts("active", 4, None, Trip(T0, 3)), 3, False),
        (Facts("active", 6, None, Trip(T0, 3)), 3, True),
        # ... unless a success after the trip started a new streak, counted whole.
        (Facts("active", 3, T0 + timedelta(seconds=1), Trip(T0, 3)), 3, True),
        (Facts("active", 2, T0 + timedelta(seconds=1), Trip(T0, 3)), 3, False),
    ],
)
def test_trips(facts: Facts, threshold: int, expected: bool) -> None:
    assert trips(facts, threshold) is expected


def test_the_note_says_why() -> None:
    facts = Facts("active", 7, None, Trip(T0, 2))
    assert counted(facts) == 5
    assert note(facts, 5) == "paused by the circuit breaker after 5 failed runs in a row (threshold 5)"


# --- a job's own setting, the canary and the hold (issue 40) ---------------------------------------


@pytest.mark.parametrize(
    ("own", "default", "expected"),
    [
        (None, 3, 3),  # no expectations: the cluster's
        (Expectations(), 3, 3),
        (Expectations(breaker=Breaker(canary_every=5)), 3, 3),  # a canary alone keeps the cluster's threshold
        (Expectations(breaker=Breaker(failures=5)), 3, 5),
        (Expectations(breaker=Breaker(failures=2)), 0, 2),  # works with the cluster's off
        (Expectations(breaker=Breaker(failures=0)), 3, 0),  # the job's own 0: never
    ],
)
def test_a_job_s_own_threshold_overrides_the_cluster_s(own: Expectations | None, default: int, expected: int) -> None:
    assert threshold(own, default) == expected


@pytest.mark.parametrize(
    ("hold", "expected"),
    [
        (Hold(3, 2), "wait"),  # 2 ticks of 3
        (Hold(3, 3), "canary"),
        (Hold(0, 50), "wait"),  # no canary: held until someone resumes it
        (Hold(3, 3, "queued"), "wait"),  # a canary in flight
        (Hold(3, 3, "running"), "wait"),
        (Hold(3, 0, "completed", success_counted=True), "resume"),
        (Hold(3, 0, "completed"), "wait"),  # until the health evaluator counted it: its streak is the old one
        (Hold(3, 0, "failed"), "rearm"),
        (Hold(3, 0, "cancelled"), "rearm"),
        (Hold(3, 0, "skipped"), "rearm"),
        (Hold(3, 0, "gone"), "rearm"),  # its run was deleted
    ],
)
def test_the_step_for_a_held_job(hold: Hold, expected: str) -> None:
    assert step(hold) == expected


def test_the_breaker_holds_a_job_only_as_its_last_step_left_it() -> None:
    assert holds("paused", 7, 7)
    assert not holds("paused", 8, 7)  # paused again, or edited, by hand
    assert not holds("active", 7, 7)
    assert not holds("paused", 7, None)


def test_the_notes_say_when_a_canary_runs_and_which_went_through() -> None:
    facts = Facts("active", 3, None)
    tripped = pause_note(facts, 3, 4)
    assert tripped.endswith("(threshold 3); a canary run every 4 ticks resumes it when one succeeds")
    sent = canary_note(tripped, T0)
    assert sent == tripped + "; a canary run let through for the tick at 2026-12-07T12:00:00+00:00"
    assert canary_note(sent, T0 + timedelta(minutes=1)).count("let through") == 1  # replaced, not appended
