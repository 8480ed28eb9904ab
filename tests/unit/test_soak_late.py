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


def test_late_ticks_are_laid_to_the_latest_fault_near_them() -> None:
    base = T0.timestamp()
    pg = Injected("pg_restart", "postgresql", base + 10, ended=base + 12, recovery_s=3.0)
    leader = Injected("kill_leader", "d1", base + 20, ended=base + 20.5, recovery_s=None)  # never recovered
    runs = [
        _run(1, 5, 1.0),  # on time
        _run(2, 11, 8.0),  # during the restart (started before the next fault)
        _run(3, 22, 7.0),  # after both began: the later one
        _run(4, 200, 6.0),  # far from any fault... but the leader's never recovered
        _run(5, 11, 30.0, attempt=2),  # a retry: not a tick's first start
        _run(6, 11, 30.0, trigger="manual"),
        _run(7, 400, 8.0),  # outside the window
    ]
    window = (T0, T0 + timedelta(seconds=300))
    late = late_ticks(runs, window, [pg, leader])
    assert [(t.tick, t.fault) for t in late] == [
        (T0 + timedelta(seconds=11), pg),
        (T0 + timedelta(seconds=22), leader),
        (T0 + timedelta(seconds=200), leader),
    ]
    assert late_ticks(runs, window, [pg])[2].fault is None  # 200 s is long past the restart's recovery
    text = late_summary(late, base)
    assert text.splitlines()[0] == "late > 5 s        3 {'pg_restart': 1, 'kill_leader': 2}"
    assert "job 1 tick +11.0s late 8.00 s: pg_restart postgresql at +10.0s (recovery 3.00 s)" in text
