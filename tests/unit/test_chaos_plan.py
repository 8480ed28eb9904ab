"""The chaos suite's fault plan is a pure function of its seed, and bounds follow the settings."""

from __future__ import annotations

from tests.cluster.faults import KINDS, plan, recovery_bound_s


def test_the_same_seed_gives_the_same_plan_and_another_seed_another() -> None:
    assert plan(7, 120) == plan(7, 120)
    assert plan(7, 120) != plan(8, 120)


def test_every_kind_appears_before_any_repeats_and_all_within_the_duration() -> None:
    faults = plan(3, 200)
    assert {f.kind for f in faults[: len(KINDS)]} == set(KINDS)
    assert all(0 < f.at_s < 200 for f in faults)
    assert [f.at_s for f in faults] == sorted(f.at_s for f in faults)


def test_recovery_bounds_grow_with_ttl_and_lease() -> None:
    assert recovery_bound_s("kill_leader", 2000, 1.5) > recovery_bound_s("kill_leader", 1000, 1.5)
    assert recovery_bound_s("pause_executor", 1000, 3.0) > recovery_bound_s("pause_executor", 1000, 1.5)
