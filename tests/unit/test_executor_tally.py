"""An executor's count of the runs it started, over a window (executor.tally), and each executor's
share as the cluster view computes it (api.cluster.shares)."""

from __future__ import annotations

from datetime import UTC, datetime

from api.cluster import shares
from cronos import presence
from cronos.store.runs import ClaimedRun, Refused
from executor.tally import WINDOW_S, Tally


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _claimed(run_id: int) -> ClaimedRun:
    return ClaimedRun(
        id=run_id, job_id=1, scheduled_for=NOW, attempt=1, trigger="schedule", epoch=1, started_at=NOW, due_at=NOW,
        exclusive=False, name="j", kind="task", payload={}, timeout_s=10, max_retries=0, retry_backoff_s=1,
        concurrency_policy="allow", webhook_secret="s",
    )  # fmt: skip


def test_only_claimed_runs_count_and_the_last_claim_is_remembered() -> None:
    clock = Clock(1000.0)
    tally = Tally("tally-unit-1", clock)
    tally.count([Refused.NOT_QUEUED, Refused.OVERLAP])
    assert (tally.started, tally.claimed_at) == (0, None)
    clock.now = 1001.0
    tally.count([_claimed(1), Refused.NOT_QUEUED, _claimed(2)])
    assert (tally.started, tally.claimed_at) == (2, 1001.0)


def test_the_recent_count_covers_the_window_or_the_nodes_age() -> None:
    clock = Clock(0.0)
    tally = Tally("tally-unit-2", clock)
    clock.now = 10.0
    tally.count([_claimed(1)] * 5)
    assert tally.counts() == presence.RunCounts(5, 5, 10.0, 10.0)  # younger than the window: since its start
    for second in range(20, int(WINDOW_S) + 100, 10):  # a beat every 10 s, a run each
        clock.now = float(second)
        tally.count([_claimed(second)])
        counts = tally.counts()
    assert counts.started == 5 + len(range(20, int(WINDOW_S) + 100, 10))
    assert WINDOW_S <= counts.recent_s < WINDOW_S + 10  # the newest sample at least a window old
    assert counts.recent == round(counts.recent_s / 10)  # one run per 10 s within it


def test_presence_carries_the_counts_and_reads_them_back() -> None:
    counts = presence.RunCounts(started=120, recent=40, recent_s=300.0, claimed_at=1700000000.5)
    node = {"role": "executor", "node_id": "e1", **counts.fields()}
    assert presence.runs_of(node) == counts
    assert presence.runs_of({"role": "executor", "node_id": "old"}) is None  # an older release says nothing
    assert presence.runs_of({**node, "runs_recent": "many"}) is None
    never = presence.RunCounts(0, 0, 12.0, None)
    assert presence.runs_of({"role": "executor", **never.fields()}) == never


def test_each_executors_share_is_by_runs_a_second_over_its_window() -> None:
    now = 1700000100.0
    found = [
        {"role": "executor", "node_id": "a", **presence.RunCounts(900, 300, 300.0, now - 0.5).fields()},
        {"role": "executor", "node_id": "b", **presence.RunCounts(100, 100, 100.0, now - 2).fields()},  # younger
        {"role": "executor", "node_id": "idle", **presence.RunCounts(0, 0, 300.0, None).fields()},
        {"role": "dispatcher", "node_id": "d"},
    ]
    out = shares(found, now)
    assert sorted(out) == ["a", "b", "idle"]
    assert (out["a"].share_pct, out["b"].share_pct, out["idle"].share_pct) == (50.0, 50.0, 0.0)
    assert (out["a"].started, out["a"].started_total, out["a"].window_s) == (300, 900, 300.0)
    assert out["a"].last_claimed_age_s == 0.5 and out["idle"].last_claimed_at is None
    quiet = shares([found[2]], now)
    assert quiet["idle"].share_pct is None  # nobody started anything: no share to tell
