"""cronos.lifecycle's "retry this run": which runs may be retried by hand, and the attempt queued."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronos.lifecycle import TERMINAL, Rerun, RerunFacts, rerun, rerun_of, rerunnable
from cronos.models import RunState

TICK = datetime(2026, 3, 1, 9, tzinfo=UTC)
NOW = datetime(2026, 3, 2, 10, tzinfo=UTC)


def facts(state: RunState, *, attempt: int = 1, newest: int = 1, unfinished: bool = False) -> RerunFacts:
    return RerunFacts(
        job_id=7, scheduled_for=TICK, attempt=attempt, state=state, revision=3, parent_run_id=11,
        newest_attempt=newest, tick_unfinished=unfinished,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("state", "unfinished", "verdict"),
    [
        (RunState.FAILED, False, Rerun.QUEUE),
        (RunState.SKIPPED, False, Rerun.QUEUE),
        (RunState.FAILED, True, Rerun.PENDING),
        (RunState.COMPLETED, False, Rerun.COMPLETED),
        (RunState.QUEUED, True, Rerun.NOT_ENDED),
        (RunState.WAITING, True, Rerun.NOT_ENDED),
        (RunState.RUNNING, True, Rerun.NOT_ENDED),
    ],
)
def test_only_an_ended_run_that_did_not_succeed_and_whose_tick_is_settled_is_retried(
    state: RunState, unfinished: bool, verdict: Rerun
) -> None:
    assert rerun(facts(state, unfinished=unfinished)) is verdict


def test_every_end_state_but_completed_may_be_retried() -> None:
    """A state added to TERMINAL later (cancelled) is retried without a change here."""
    assert {s for s in RunState if rerunnable(s)} == set(TERMINAL) - {RunState.COMPLETED}


def test_the_new_attempt_keeps_the_tick_revision_and_parent_and_follows_the_newest_attempt() -> None:
    new = rerun_of(facts(RunState.FAILED, attempt=1, newest=4), NOW)
    assert (new.job_id, new.scheduled_for, new.attempt, new.trigger) == (7, TICK, 5, "retry")
    assert (new.due_at, new.revision, new.parent_run_id) == (NOW, 3, 11)
    assert rerun_of(facts(RunState.SKIPPED, attempt=2, newest=2), NOW).attempt == 3
