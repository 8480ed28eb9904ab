"""`cronos bench apscheduler`'s bookkeeping: which tick a start is for, and the window's verdict."""

from __future__ import annotations

from cronos.bench.apscheduler import Ledger, judge
from cronos.bench.window import Window


def test_a_start_takes_the_run_time_submitted_for_its_job() -> None:
    ledger = Ledger()
    ledger.submitted(0, [10_000])
    ledger.submitted(1, [10_000])
    ledger.started(1, 10_000_250)  # us: 0.25 ms after 10 s
    ledger.started(0, 10_012_000)
    assert ledger.delays == {(1, 10_000): [0.25], (0, 10_000): [12.0]}
    assert ledger.executions == 2 and ledger.unmatched == 0


def test_a_run_time_skipped_as_missed_does_not_shift_the_next_start() -> None:
    ledger = Ledger()
    ledger.submitted(0, [10_000])  # later than its grace: APScheduler never called the function
    ledger.submitted(0, [12_000])
    ledger.started(0, 12_003_000)
    assert ledger.delays == {(0, 12_000): [3.0]}


def test_a_start_nobody_submitted_is_counted_apart() -> None:
    ledger = Ledger()
    ledger.started(0, 1_000_000)
    assert ledger.delays == {} and ledger.unmatched == 1


def test_the_verdict_counts_missed_and_duplicated_ticks_of_the_window_only() -> None:
    window = Window(10.5, 13.5)  # ticks 11, 12, 13
    ledger = Ledger(
        delays={
            (0, 10_000): [1.0],  # before the window: not counted
            (0, 11_000): [2.0],
            (0, 12_000): [3.0, 900.0],  # ran twice
            (0, 13_000): [4.0],
            (1, 11_000): [5.0],
            (1, 13_000): [6.0],  # (1, 12_000) never ran
        }
    )
    verdict = judge(ledger, jobs=2, window=window, cpu_s=0.006)
    assert (verdict.expected, verdict.executions, verdict.missed, verdict.duplicates) == (6, 6, 1, 1)
    assert sorted(verdict.delays_ms) == [2.0, 3.0, 4.0, 5.0, 6.0]  # a tick's first start
    assert verdict.failed
    assert verdict.runs_per_s == 2.0 and verdict.cpu_per_run_ms == 1.0
