"""cronos.lifecycle.allot: a concurrency group's free slots go to its contenders in tick order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from cronos.lifecycle import Allotment, Contender, allot

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def c(run_id: int, second: int, *, waiting: bool = False) -> Contender:
    return Contender(run_id, T0 + timedelta(seconds=second), waiting)


def test_free_slots_go_in_tick_order_then_run_id_whether_waiting_or_being_claimed() -> None:
    decided = allot(3, 1, [c(9, 2), c(4, 1, waiting=True), c(3, 1, waiting=True), c(7, 0)])
    assert decided == Allotment(claim=frozenset({7}), wait=frozenset({9}), wake=(3,))


def test_a_full_group_or_one_over_its_limit_after_a_cut_gives_nothing() -> None:
    assert allot(2, 2, [c(1, 0)]) == Allotment(wait=frozenset({1}))
    assert allot(2, 5, [c(1, 0), c(2, 0, waiting=True)]) == Allotment(wait=frozenset({1}))


def test_a_new_tick_never_overtakes_a_run_that_waits() -> None:
    assert allot(1, 0, [c(5, 10), c(2, 3, waiting=True)]) == Allotment(wait=frozenset({5}), wake=(2,))


contenders = st.lists(
    st.builds(c, st.integers(1, 10_000), st.integers(0, 50), waiting=st.booleans()),
    unique_by=lambda x: x.run_id,
    max_size=30,
)


@given(st.integers(1, 20), st.integers(0, 25), contenders)
def test_never_more_than_the_limit_and_the_earliest_ticks_first(limit: int, held: int, runs: list[Contender]) -> None:
    decided = allot(limit, held, runs)
    granted = decided.claim | set(decided.wake)
    assert held + len(granted) <= max(limit, held)
    assert len(granted) == min(max(limit - held, 0), len(runs))
    order = sorted(runs, key=lambda r: (r.scheduled_for, r.run_id))
    assert granted == {r.run_id for r in order[: len(granted)]}
    assert decided.wait == {r.run_id for r in runs if not r.waiting} - granted
    assert list(decided.wake) == [r.run_id for r in order if r.run_id in decided.wake]
