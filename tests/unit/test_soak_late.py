"""The soak's late-tick report: which ticks count as late and which fault each is laid to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.cluster.checker import RunRow
from tests.cluster.faults import Injected
from tests.cluster.soak import late_summary, late_ticks

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _run(n: int, tick_s: float, delay_s: float, *, attempt: int = 1, trigger: str = "schedule") -> RunRow:
    tick = T0 + timedelta(seconds=tick_s)
    return RunRow(n, 1, tick, attempt, trigger, "completed", tick, tick, started_at=tick + timedelta(seconds=delay_s))


def test_late_ticks_are_laid_to_the_fault_under_way_when_they_fell_due() -> None:
    base = T0.timestamp()
    pg = Injected("pg_restart", "postgresql", base + 10, ended=base + 12, recovery_s=3.0)  # over at +13
    cut = Injected("partition_executor_pg", "e2", base + 20.5, ended=base + 23, recovery_s=2.0)  # token out
    leader = Injected("kill_leader", "d1", base + 24, ended=base + 24.5, recovery_s=None)  # never recovered
    runs = [
        _run(1, 5, 1.0),  # on time
        _run(2, 11, 8.0),  # during the restart, though the partition began before it started
        _run(3, 20, 7.0),  # the partition began just after it fell due: before it started
        _run(4, 200, 6.0),  # long after everything... but the leader's never recovered
        _run(5, 11, 30.0, attempt=2),  # a retry: not a tick's first start
        _run(6, 11, 30.0, trigger="manual"),
        _run(7, 400, 8.0),  # outside the window
        _run(8, 15.5, 6.0),  # 2.5 s after the restart was over: still laid to it
        _run(9, 17, 6.0),  # nothing under way: the fault begun while it waited
    ]
    window = (T0, T0 + timedelta(seconds=300))
    late = late_ticks(runs, window, [pg, cut, leader])
    assert [(t.job_id, (t.tick - T0).total_seconds(), t.fault) for t in late] == [
        (1, 11, pg), (1, 20, cut), (1, 200, leader), (1, 15.5, pg), (1, 17, cut),
    ]  # fmt: skip
    assert late_ticks(runs, window, [pg, cut])[2].fault is None  # 200 s is long past both
    text = late_summary(late, base)
    assert text.splitlines()[0] == "late > 5 s        5 {'pg_restart': 2, 'partition_executor_pg': 2, 'kill_leader': 1}"
    assert "job 1 tick +11.0s late 8.00 s: pg_restart postgresql at +10.0s (recovery 3.00 s)" in text
