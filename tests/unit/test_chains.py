"""cronos.chains: when an edge fires, and what a join of one tick does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronos.chains import Arrival, Decision, Join, check, deadline, decide, edge_on, final, fires
from cronos.errors import InvalidInput
from cronos.models import Chain, ChainJoin, RunState

C, F, X = RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED


def _chain(on: dict[str, str] | None = None, timeout_s: float = 60, on_timeout: str = "skip") -> Chain:
    return Chain(on=on or {}, join=ChainJoin(timeout_s=timeout_s, on_timeout=on_timeout))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("on", "state", "expected"),
    [("completed", C, True), ("completed", F, False), ("failed", F, True), ("failed", C, False),
     ("failed", X, False), ("ended", C, True), ("ended", F, True), ("ended", X, True)],
)  # fmt: skip
def test_an_edge_fires_on_the_outcomes_it_names(on: str, state: RunState, expected: bool) -> None:
    assert fires(on, state) is expected  # type: ignore[arg-type]


def test_a_failure_with_a_retry_left_does_not_end_its_tick() -> None:
    assert not final(F, retry_left=True)
    assert final(F, retry_left=False) and final(C, retry_left=False) and final(X, retry_left=False)
    assert not final(RunState.SKIPPED, retry_left=False)


def test_a_parent_not_named_in_on_waits_for_completed() -> None:
    assert edge_on(None, 3) == "completed"
    assert edge_on(Chain(on={"3": "failed"}), 3) == "failed"
    assert edge_on(Chain(on={"3": "failed"}), 4) == "completed"


def test_check_refuses_an_edge_of_a_job_that_is_no_parent_and_a_join_without_parents() -> None:
    check([3, 4], Chain(on={"3": "ended"}, join=ChainJoin()))
    check([], None)
    with pytest.raises(InvalidInput) as named:
        check([3], Chain(on={"5": "failed"}))
    assert named.value.field == "$.chain.on" and "'5'" in str(named.value)
    with pytest.raises(InvalidInput) as joined:
        check([], Chain(join=ChainJoin()))
    assert joined.value.field == "$.chain.join"


def test_a_join_waits_for_every_parent_then_runs_once() -> None:
    chain = _chain()
    assert decide([1, 2], chain, [Arrival(1, 10, C)], timed_out=False) == Decision(Join.WAIT)
    assert decide([1, 2], chain, [Arrival(1, 10, C), Arrival(2, 11, C)], timed_out=False) == Decision(Join.RUN)


def test_a_join_skips_at_once_when_a_parent_ends_without_firing_its_edge() -> None:
    decision = decide([1, 2], _chain(), [Arrival(2, 11, F)], timed_out=False)
    assert decision == Decision(Join.SKIP, "parent 2 ended failed; its edge waits for completed")
    failure_path = _chain(on={"2": "failed"})
    assert decide([1, 2], failure_path, [Arrival(1, 10, C), Arrival(2, 11, F)], timed_out=False).join is Join.RUN


@pytest.mark.parametrize(("on_timeout", "join"), [("run", Join.RUN), ("skip", Join.SKIP)])
def test_a_join_that_times_out_runs_or_skips_naming_the_parents_it_waited_for(on_timeout: str, join: Join) -> None:
    decision = decide([1, 2, 3], _chain(on_timeout=on_timeout), [Arrival(2, 11, C)], timed_out=True)
    assert decision == Decision(join, "join timed out after 60 s waiting for parent(s) 1, 3")


def test_a_join_counts_a_parents_latest_arrival_and_ignores_jobs_no_longer_its_parents() -> None:
    arrivals = [Arrival(1, 10, F), Arrival(1, 12, C), Arrival(9, 13, F)]
    assert decide([1], _chain(), arrivals, timed_out=False).join is Join.RUN


def test_a_joins_deadline_is_its_timeout_after_the_first_end() -> None:
    first = datetime(2026, 1, 1, tzinfo=UTC)
    assert deadline(first, _chain(timeout_s=90)) == first + timedelta(seconds=90)
