"""Nodes whose wall clock is 2 s off (issue 13 item 4): due times are judged by PostgreSQL's clock.

One dispatcher and one executor run under libfaketime (Debian package `faketime`), one 2 s
fast and the other 2 s slow, the other way round, and both fast (a leader pushing early to an
executor that would claim early); PostgreSQL and Redis keep the true time. The ledger must
hold G1-G5 with no run started before its tick (the checker's `early_start`), and every tick
must start within a second of its due time, as it does without skew.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from datetime import timedelta

import pytest

from tests.cluster.harness import Cluster
from tests.cluster.scenario import add_workload, assert_ok, wait_ready

LIBFAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))), None)

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(120),
    pytest.mark.skipif(LIBFAKETIME is None, reason="libfaketime not installed (apt-get install faketime)"),
]

WINDOW_S = 8.0  # seconds of every-second ticks checked
ON_TIME_S = 1.0  # the most a tick may start after its due time here (no fault, a 2-core box)

MakeCluster = Callable[..., Cluster]


def skew(cluster: Cluster, name: str, seconds: int) -> None:
    """Restart node `name` with its wall clock `seconds` off (its monotonic clock stays true)."""
    assert LIBFAKETIME is not None
    node = cluster.nodes[name]
    cluster.kill(node)
    node.env |= {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": f"{seconds:+d}s", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    cluster.restart(node)
    cluster.mark(f"{name} runs {seconds:+d} s off")


@pytest.mark.parametrize(
    ("dispatcher_s", "executor_s"),
    [(2, -2), (-2, 2), (2, 2)],
    ids=["dispatcher-fast-executor-slow", "dispatcher-slow-executor-fast", "both-fast"],
)
async def test_a_node_2_s_off_starts_nothing_early_misses_nothing_doubles_nothing(
    make_cluster: MakeCluster, dispatcher_s: int, executor_s: int
) -> None:
    cluster = make_cluster(dispatchers=1, executors=1)
    skew(cluster, "d1", dispatcher_s)
    skew(cluster, "e1", executor_s)
    workload = await add_workload(cluster, long=False, retry=False)  # every second: a no-op and an http call
    start = await wait_ready(cluster, workload)
    report = await assert_ok(cluster, workload, start, spanning=start + timedelta(seconds=WINDOW_S))
    delays = report.start_delays_s
    skews = f"d1 {dispatcher_s:+d} s, e1 {executor_s:+d} s"
    print(f"\nskew {skews}: {len(delays)} ticks, start delay {min(delays):.3f}-{max(delays):.3f} s")
    assert len(report.start_delays_s) >= WINDOW_S, report.describe()
    assert min(report.start_delays_s) >= 0 and max(report.start_delays_s) <= ON_TIME_S, sorted(report.start_delays_s)
