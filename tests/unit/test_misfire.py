"""Misfire policy and deterministic jitter (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from cronos.misfire import decide, jitter_s

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _ago(*seconds: float) -> list[datetime]:
    return [NOW - timedelta(seconds=s) for s in seconds]


def test_on_time_ticks_run_under_every_policy_even_with_no_grace() -> None:
    for policy in ("run_all", "run_once", "skip"):
        assert decide(policy, _ago(0.5, 0), NOW, grace_s=0) == ["run", "run"]


def test_ticks_older_than_the_grace_are_skipped_under_every_policy() -> None:
    for policy in ("run_all", "run_once", "skip"):
        assert decide(policy, _ago(300, 120), NOW, grace_s=60) == ["skip", "skip"]


def test_run_all_runs_each_late_tick_within_grace() -> None:
    assert decide("run_all", _ago(120, 50, 40, 0), NOW, grace_s=60) == ["skip", "run", "run", "run"]


def test_skip_skips_each_late_tick_but_runs_the_on_time_one() -> None:
    assert decide("skip", _ago(50, 40, 0), NOW, grace_s=60) == ["skip", "skip", "run"]


def test_run_once_runs_only_the_newest_late_tick() -> None:
    assert decide("run_once", _ago(50, 40, 30), NOW, grace_s=60) == ["skip", "skip", "run"]
    # With an on-time tick, that one is the "once": the late ones are skipped.
    assert decide("run_once", _ago(50, 40, 0), NOW, grace_s=60) == ["skip", "skip", "run"]


def test_run_once_leaves_the_run_to_a_later_chunk_when_incomplete() -> None:
    assert decide("run_once", _ago(50, 40), NOW, grace_s=60, complete=False) == ["skip", "skip"]


@given(
    st.sampled_from(["run_all", "run_once", "skip"]),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=50, unique=True),
    st.floats(min_value=0, max_value=5_000),
)
def test_every_tick_gets_exactly_one_decision_and_run_once_runs_at_most_one_late(
    policy: str, ages: list[int], grace: float
) -> None:
    ticks = sorted(_ago(*ages))
    decisions = decide(policy, ticks, NOW, grace)  # type: ignore[arg-type]
    assert len(decisions) == len(ticks)
    late_runs = [t for t, d in zip(ticks, decisions, strict=True) if d == "run" and t < NOW - timedelta(seconds=1)]
    if policy == "run_once":
        assert len(late_runs) <= 1
    if policy == "skip":
        assert late_runs == []
    for tick, decision in zip(ticks, decisions, strict=True):
        if NOW - tick > timedelta(seconds=max(grace, 1.0)):
            assert decision == "skip"


def test_jitter_is_deterministic_bounded_and_spread() -> None:
    offsets = [jitter_s(7, 1_000 * i, 10.0) for i in range(1000)]
    assert offsets == [jitter_s(7, 1_000 * i, 10.0) for i in range(1000)]
    assert all(0 <= o < 10.0 for o in offsets)
    assert len(set(offsets)) > 900
    assert 4.0 < sum(offsets) / len(offsets) < 6.0
    assert jitter_s(7, 1000, 0) == 0.0
    assert jitter_s(7, 1000, 10.0) != jitter_s(8, 1000, 10.0)
