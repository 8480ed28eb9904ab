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


def test_a_late_tick_within_the_grace_runs_under_every_policy() -> None:
    # A leader failover makes ticks a few seconds late: that is lateness, not a misfire (G7).
    for policy in ("run_all", "run_once", "skip"):
        assert decide(policy, _ago(50, 40, 3, 2), NOW, grace_s=60) == ["run"] * 4


def test_skip_skips_each_misfired_tick() -> None:
    assert decide("skip", _ago(300, 120, 30, 0), NOW, grace_s=60) == ["skip", "skip", "run", "run"]


def test_run_all_runs_each_misfired_tick() -> None:
    assert decide("run_all", _ago(300, 120, 30), NOW, grace_s=60) == ["run", "run", "run"]


def test_run_once_coalesces_misfired_ticks_into_the_newest() -> None:
    assert decide("run_once", _ago(300, 200, 120), NOW, grace_s=60) == ["skip", "skip", "run"]
    # A tick within the grace follows: it runs, and stands for the misfired ones.
    assert decide("run_once", _ago(300, 120, 30), NOW, grace_s=60) == ["skip", "skip", "run"]


def test_run_once_leaves_the_run_to_a_later_chunk_when_incomplete() -> None:
    assert decide("run_once", _ago(300, 200), NOW, grace_s=60, complete=False) == ["skip", "skip"]


@given(
    st.sampled_from(["run_all", "run_once", "skip"]),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=50, unique=True),
    st.floats(min_value=0, max_value=5_000),
    st.booleans(),
)
def test_every_tick_gets_one_decision_and_the_policy_only_touches_misfired_ticks(
    policy: str, ages: list[int], grace: float, complete: bool
) -> None:
    ticks = sorted(_ago(*ages))
    decisions = decide(policy, ticks, NOW, grace, complete=complete)  # type: ignore[arg-type]
    assert len(decisions) == len(ticks)
    misfired = [NOW - t > timedelta(seconds=max(grace, 1.0)) for t in ticks]
    for is_misfired, decision in zip(misfired, decisions, strict=True):
        if not is_misfired:
            assert decision == "run"
    misfired_runs = [d for m, d in zip(misfired, decisions, strict=True) if m and d == "run"]
    expected = {
        "run_all": misfired.count(True),
        "skip": 0,
        # One run for the lot, only when it is the last tick of a complete list.
        "run_once": int(complete and bool(misfired) and misfired[-1]),
    }[policy]
    assert len(misfired_runs) == expected


def test_jitter_is_deterministic_bounded_and_spread() -> None:
    offsets = [jitter_s(7, 1_000 * i, 10.0) for i in range(1000)]
    assert offsets == [jitter_s(7, 1_000 * i, 10.0) for i in range(1000)]
    assert all(0 <= o < 10.0 for o in offsets)
    assert len(set(offsets)) > 900
    assert 4.0 < sum(offsets) / len(offsets) < 6.0
    assert jitter_s(7, 1000, 0) == 0.0
    assert jitter_s(7, 1000, 10.0) != jitter_s(8, 1000, 10.0)
