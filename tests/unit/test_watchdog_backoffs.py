"""The watchdog's per-run backoff: a run pushed again waits twice as long each time, capped."""

from __future__ import annotations

from dispatcher.watchdog import MAX_DOUBLINGS, Backoffs


def test_a_run_pushed_again_waits_doubling_times_then_a_capped_one() -> None:
    backoffs = Backoffs(base_s=3.0)
    now = 100.0
    waits = []
    for _ in range(MAX_DOUBLINGS + 3):
        assert backoffs.waiting(now) == []  # free to push at this instant
        backoffs.pushed([7], now)
        assert backoffs.waiting(now) == [7]
        step = 0.5
        while 7 in backoffs.waiting(now + step):
            step += 0.5
        waits.append(step)
        now += step
    assert waits == [3.0, 6.0, 12.0, 24.0, 48.0, 48.0, 48.0]


def test_runs_not_pushed_again_once_their_wait_is_over_are_forgotten() -> None:
    backoffs = Backoffs(base_s=1.0)
    backoffs.pushed([1, 2], 0.0)
    backoffs.pushed([2], 1.5)  # run 1 was claimed meanwhile: not overdue, not pushed
    assert len(backoffs) == 1 and backoffs.waiting(1.5) == [2]
    backoffs.pushed([1], 2.0)  # overdue again later: starts over at the base wait
    assert sorted(backoffs.waiting(2.9)) == [1, 2] and backoffs.waiting(3.1) == [2]
