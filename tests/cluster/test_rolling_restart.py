"""A rolling restart of every process at default settings loses, doubles, skips and delays no tick.

Two dispatchers, two executors and the API run 50 every-second jobs (every policy at its default:
forbid, run_once, 60 s grace; half of them take 50 ms). Each node in turn (the dispatchers, the
leader first, then the executors, then the API) gets a replacement under a new node id; once the
replacement is up (a dispatcher standing by as a candidate, an executor serving, the API
answering /health on its own port, as behind a load balancer) the old node is sent SIGTERM and
exits. A stopping leader pushes the ticks it wrote before it frees its lock and wakes a standby
(`{leader}:released`), which takes over at once; a stopping executor drains. Over the whole
window, from before the first restart to a few seconds after the last exit: every tick of every
job has exactly one first-attempt run, none is skipped, and each started within 2 s of its tick.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.cluster.checker import JobDef, RunRow
from tests.cluster.harness import Cluster
from tests.cluster.ledger import fetch_runs, insert_job, load
from tests.cluster.rolling import Step, elections, log_lines, roll
from tests.cluster.scenario import Workload, probe_started, verify, wait_ready
from tests.cluster.ticks import expected_ticks
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

MakeCluster = Callable[..., Cluster]

# The production defaults, as test_failover_defaults runs them (the harness shortens them for the chaos suite).
DEFAULTS = {"ttl_ms": 5000, "lease_s": 10.0, "drain_s": 30.0}
DEFAULT_ENV = {"CRONOS_LEADER_DB_TIMEOUT_MS": "2000", "CRONOS_RESYNC_INTERVAL_S": "30"}

JOBS = 50
MAX_DELAY_S = 2.0  # started_at - scheduled_for of every run in the window
BASELINE_S = 3.0  # steady running checked before the first restart
GAP_S = 3.0  # between two steps: each handover's start delays are its own
AFTER_S = 3.0  # the window ends this long after the last old node exited
AROUND_S = (1.0, 3.0)  # a step's ticks: from this long before its SIGTERM to this long after its exit
EVENTS = {
    "leader.elected",
    "leader.flushed",
    "leader.lost",
    "leader.release_failed",
    "dispatcher.handover_seen",
    "runs.repushed",
    "runs.overdue_repushed",
    "runs.misfired",
    "process.stopping",
    "executor.draining",
    "executor.given_back",
    "executor.drain_cancelled",
    "executor.drained",
    "run.skipped",
    "run.failed",
    "run.lost",
}
NOISY = {"run.waiting", "run.skipped"}  # counted per node, a few lines shown


def _floor(instant: datetime) -> datetime:
    return instant.replace(microsecond=0)


def _delay(run: RunRow) -> float | None:
    return None if run.started_at is None else (run.started_at - run.scheduled_for).total_seconds()


async def _every_job_ran(cluster: Cluster, jobs: list[JobDef]) -> None:
    ids = [job.id for job in jobs]

    async def all_ran() -> bool:
        rows = await fetch_runs(cluster.dsn, "job_id = ANY($1::bigint[]) AND state = 'completed'", ids)
        return {r.job_id for r in rows} == set(ids)

    await wait_for(all_ran, timeout=30, interval=0.2, what="a completed run of every job")


def _tick_of(record: dict[str, object]) -> datetime:
    """The tick a run's log record is about (the epoch when it names none)."""
    try:
        return datetime.fromisoformat(str(record["scheduled_for"]))
    except (KeyError, ValueError):
        return datetime.fromtimestamp(0, UTC)


def _max_delay(runs: list[RunRow], since: datetime, until: datetime) -> tuple[float, int]:
    delays = [d for r in runs if since <= r.scheduled_for <= until and (d := _delay(r)) is not None]
    return max(delays, default=0.0), len(delays)


def _summary(
    cluster: Cluster, steps: list[Step], firsts: list[RunRow], window: tuple[datetime, datetime], ready_at: float
) -> str:
    start, end = window
    lines = [f"rolling restart, window {start.isoformat()} .. {end.isoformat()}"]
    if steps:
        base, count = _max_delay(firsts, start, datetime.fromtimestamp(steps[0].started_at, UTC))
        lines.append(f"  before the first restart: max start delay {base:.3f} s over {count} runs")
    for i, step in enumerate(steps):
        since = step.sigterm_dt - timedelta(seconds=AROUND_S[0])
        worst, count = _max_delay(firsts, since, step.exited_dt + timedelta(seconds=AROUND_S[1]))
        text = (
            f"  {step.role} {step.old} -> {step.new}: up {step.up_at - step.started_at:.2f} s after start;"
            f" SIGTERM -> exit {step.exited_at - step.sigterm_at:.2f} s (exit {step.exit_code})"
        )
        if step.role == "dispatcher":
            if step.was_leader and step.elected is not None:
                text += (
                    f"; leader: SIGTERM -> epoch {step.elected.epoch} elected ({step.elected.holder})"
                    f" {step.handover_s:.3f} s"
                )
                following = steps[i + 1].sigterm_at if i + 1 < len(steps) else step.exited_at + 5
                text += _handover_logs(cluster, step, until=following)
            elif step.was_leader:
                text += f"; leader: NO election after epoch {step.epoch_before}"
            else:
                text += "; a standby (no handover)"
        text += f"; max start delay around it {worst:.3f} s over {count} runs"
        lines.append(text)
    for node in cluster.nodes.values():  # ticks of the window that waited for their predecessor (or were skipped)
        counts = Counter(
            (str(r["event"]), str(r.get("scheduled_for", ""))[11:19])
            for r in node.records()
            if r.get("event") in NOISY and start < _tick_of(r) <= end
        )
        if counts:
            text = ", ".join(f"{event} {count}x for tick {tick}" for (event, tick), count in sorted(counts.items()))
            lines.append(f"  {node.name}: {text}")
    lines.append(f"  (cluster ready {ready_at:.3f})")
    return "\n".join(lines)


def _handover_logs(cluster: Cluster, step: Step, until: float) -> str:
    """What the node logs say of a leader's handover (up to `until`), timed from its SIGTERM."""
    since = step.sigterm_at - 0.5
    parts = []
    for record in log_lines(cluster.nodes[step.old], {"leader.flushed"}, since, until):
        parts.append(f"{step.old} flushed {record.get('count')} at +{_after(record, step):.3f} s")
    for node in cluster.role("dispatcher"):
        for record in log_lines(node, {"dispatcher.handover_seen", "leader.elected", "runs.repushed"}, since, until):
            what = {"dispatcher.handover_seen": "saw the handover", "leader.elected": "elected"}.get(
                str(record["event"]), f"repushed {record.get('count')} (unmarked {record.get('unmarked')})"
            )
            parts.append(f"{node.name} {what} at +{_after(record, step):.3f} s")
    return " [" + ", ".join(parts) + "]"


def _after(record: dict[str, object], step: Step) -> float:
    return datetime.fromisoformat(str(record["ts"])).timestamp() - step.sigterm_at


def _log_excerpt(cluster: Cluster, steps: list[Step], window: tuple[datetime, datetime]) -> str:
    since, until = window[0].timestamp() - 1, window[1].timestamp() + 5
    lines = ["timeline:"]
    lines += [f"  {at:.3f} {what}" for at, what in cluster.timeline if since - 30 <= at <= until]
    lines.append("node logs (events of the handovers and drains):")
    for node in cluster.nodes.values():
        shown: Counter[str] = Counter()
        for record in log_lines(node, EVENTS | NOISY, since, until):
            event = str(record.get("event"))
            shown[event] += 1
            if event in NOISY and shown[event] > 5:
                continue
            extra = {k: v for k, v in record.items() if k not in ("ts", "level", "event", "msg", "logger")}
            lines.append(f"  {record['ts']} {node.name} {event} {record.get('msg', '')} {extra}")
    return "\n".join(lines)


async def test_a_rolling_restart_of_every_process_at_defaults_loses_no_tick(
    make_cluster: MakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = make_cluster(dispatchers=2, executors=2, api=True, extra_env=DEFAULT_ENV, **DEFAULTS)
    jobs = [
        await insert_job(
            cluster.dsn, f"every-second-{i}", "* * * * * *", payload={"action": "sleep", "seconds": 0.05 * (i % 2)}
        )
        for i in range(JOBS)
    ]
    workload = Workload(probe=jobs[0], jobs=jobs)
    await wait_ready(cluster, workload)
    await _every_job_ran(cluster, jobs)
    ready_at = cluster.mark("every job ran")
    start = _floor(datetime.now(UTC))  # the window: ticks after this
    await asyncio.sleep(BASELINE_S)

    leader = cluster.leader()
    assert leader is not None
    dispatchers = sorted(cluster.role("dispatcher"), key=lambda n: (n is not leader, n.name))
    executors = sorted(cluster.role("executor"), key=lambda n: n.name)
    plan = [(node, f"d{i}") for i, node in enumerate(dispatchers, len(dispatchers) + 1)]
    plan += [(node, f"e{i}") for i, node in enumerate(executors, len(executors) + 1)]
    plan += [(node, "api2") for node in cluster.role("api")]
    steps: list[Step] = []
    for i, (old, name) in enumerate(plan):
        if i:
            await asyncio.sleep(GAP_S)
        stop_timeout = cluster.ttl_ms / 1000 + 10 if old.role == "dispatcher" else 2 * cluster.drain_s + 10
        steps.append(await roll(cluster, old, name, stop_timeout_s=stop_timeout))
        cluster.assert_alive()

    end = _floor(datetime.fromtimestamp(steps[-1].exited_at, UTC) + timedelta(seconds=AFTER_S))
    # every tick due in the window has been written and pushed once one 2 s past its end started
    await probe_started(cluster, workload, end + timedelta(seconds=2), timeout=30)
    report = await verify(cluster, workload, start, end=end)
    ledger = await load(cluster.dsn)

    window = (start, end)
    ours = {job.id for job in jobs}
    firsts = [
        r
        for r in ledger.runs
        if r.job_id in ours and r.trigger == "schedule" and r.attempt == 1 and start < r.scheduled_for <= end
    ]
    per_tick = Counter((r.job_id, r.scheduled_for) for r in firsts)
    expected = {
        (job.id, tick)
        for job in jobs
        for tick in expected_ticks(job.cron_expression, job.timezone, max(start, job.created_at or start), end)
    }
    lost = sorted(expected - per_tick.keys())
    windowed = [r for r in ledger.runs if start < r.scheduled_for <= end]
    doubled = sorted(key for key, count in per_tick.items() if count > 1)
    skipped = [r for r in windowed if r.state == "skipped"]  # any run at all
    # Outside the window (the cluster's start-up): reported, not judged here.
    skipped_outside = Counter(
        (r.scheduled_for.isoformat(), r.skip_reason) for r in ledger.runs if r.state == "skipped" and r not in skipped
    )
    late = [r for r in windowed if r.started_at is not None and (_delay(r) or 0.0) > MAX_DELAY_S]
    unfinished = [r for r in firsts if r.state != "completed"]
    worst, count = _max_delay(firsts, start, end)

    summary = _summary(cluster, steps, firsts, window, ready_at)
    summary += (
        f"\n  whole window: {len(expected)} ticks expected, {len(firsts)} first attempts, max start delay"
        f" {worst:.3f} s over {count}; lost {len(lost)}, doubled {len(doubled)}, skipped {len(skipped)},"
        f" late (> {MAX_DELAY_S:g} s) {len(late)}, not completed {len(unfinished)}"
        f"\n  skipped outside the window (start-up; not judged): {dict(skipped_outside) or 'none'}"
        f"\n  elections: {[(e.epoch, e.holder, e.elected_at.isoformat()) for e in await elections(cluster)]}"
    )
    with capsys.disabled():
        print("\n" + summary)
    detail = summary + "\n" + report.describe() + "\n" + _log_excerpt(cluster, steps, window)

    assert expected and len(steps) == len(plan), detail
    assert all(s.exit_code == 0 for s in steps), "an old node did not exit cleanly\n" + detail
    api_rolled = [s.role for s in steps].count("api") == 1
    assert api_rolled and cluster.health() == 200, "the new API does not answer\n" + detail
    dispatcher_steps = [s for s in steps if s.role == "dispatcher"]
    assert any(s.was_leader for s in dispatcher_steps), "no leader was restarted\n" + detail
    assert all(s.elected is not None for s in dispatcher_steps if s.was_leader), "no new leader\n" + detail
    assert not lost, f"ticks lost: {lost[:20]}\n" + detail
    assert not doubled, f"ticks doubled: {doubled[:20]}\n" + detail
    assert not skipped, "skipped runs:\n" + "\n".join(map(str, skipped[:20])) + "\n" + detail
    assert not late, f"runs started > {MAX_DELAY_S:g} s late:\n" + "\n".join(map(str, late[:20])) + "\n" + detail
    assert not unfinished, "runs not completed:\n" + "\n".join(map(str, unfinished[:20])) + "\n" + detail
    assert report.ok, detail
    assert not cluster.unexpected_exits(), "\n".join(cluster.unexpected_exits())
