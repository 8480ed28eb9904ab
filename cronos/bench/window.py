"""`cronos bench e2e`'s verdict on its measured window, from the runs ledger and from the
execution counter of `cronos.bench.counter` (real executions, not ledger rows).

Every benchmark job fires each whole second, so the ticks expected in a window (start, end]
are each job at each whole second strictly after `start` up to `end`. A tick is missed
when it has no completed run (ledger) or no counted execution (counter), and duplicated
when it has more than one of either.

The headline start delay is measured at the task: when the task's first statement ran (its own
wall-clock stamp) minus the tick, as any harness outside Cronos measures it. The ledger's
`started_at - scheduled_for` (the claim) is shown beside it: the API's, CLI's and metrics'
figure, which leaves out the hand-off from the claim to the task's code.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from cronos.bench.common import pct, table
from cronos.bench.counter import executions_key, parse_field, started_key, started_ms

# $1, $2: the window's bounds (start exclusive, end inclusive).
WINDOW_RUNS = """
SELECT job_id, (extract(epoch FROM scheduled_for) * 1000)::bigint AS ms, state, node_id,
       extract(epoch FROM started_at - scheduled_for) AS delay_s
FROM runs WHERE scheduled_for > $1 AND scheduled_for <= $2
"""
# $1, $2: the window's bounds: completed runs that finished inside it.
FINISHED_IN = "SELECT count(*) FROM runs WHERE state = 'completed' AND finished_at > $1 AND finished_at <= $2"
STATE_COUNTS = "SELECT state, count(*) AS n FROM runs GROUP BY state ORDER BY state"

Tick = tuple[int, int]  # (job_id, scheduled_for_ms)


@dataclass(frozen=True, slots=True)
class Window:
    start: float  # epoch seconds, exclusive
    end: float  # epoch seconds, inclusive

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def ticks_ms(self) -> list[int]:
        return [s * 1000 for s in range(math.floor(self.start) + 1, math.floor(self.end) + 1)]

    @property
    def bounds(self) -> tuple[datetime, datetime]:
        return datetime.fromtimestamp(self.start, UTC), datetime.fromtimestamp(self.end, UTC)


@dataclass(frozen=True, slots=True)
class Verdict:
    expected: int
    completed: int  # expected ticks with a completed run
    executions: int  # counted executions of expected ticks
    delays_ms: list[float]  # at the claim: the ledger's started_at - scheduled_for (cronos.delays)
    task_delays_ms: list[float]  # at the task: its first statement's wall clock - scheduled_for (the headline)
    missed_ledger: int
    missed_counter: int
    dup_ledger: int
    dup_counter: int
    finished_in_window: int
    window_states: dict[str, int]
    all_states: dict[str, int]
    shares: dict[str, int]  # node id -> completed runs of the expected ticks (every executor, 0 included)
    node_task_delays_ms: dict[str, list[float]]  # node id -> the task delays of the runs it completed

    @property
    def failed(self) -> bool:
        return bool(self.missed_ledger or self.missed_counter or self.dup_ledger or self.dup_counter)


async def judge(
    conn: asyncpg.Connection, client: Any, prefix: str, job_ids: list[int], window: Window, nodes: Sequence[str] = ()
) -> Verdict:
    """The window's verdict; `nodes` are the executors' node ids, listed in the shares even when they ran nothing."""
    expected = {(job, ms) for job in job_ids for ms in window.ticks_ms}
    rows = await conn.fetch(WINDOW_RUNS, *window.bounds)
    ran = [r for r in rows if r["state"] == "completed" and (r["job_id"], r["ms"]) in expected]
    completed = Counter((r["job_id"], r["ms"]) for r in ran)
    counted: Counter[Tick] = Counter()
    for field, value in (await client.hgetall(executions_key(prefix))).items():
        job_id, ms, _attempt = parse_field(field)
        counted[(job_id, ms)] += int(value)
    node_of = {(r["job_id"], r["ms"]): r["node_id"] or "?" for r in ran}
    task_delays: list[float] = []
    by_node: dict[str, list[float]] = {node: [] for node in nodes}
    for field, value in (await client.hgetall(started_key(prefix))).items():
        job_id, ms, attempt = parse_field(field)
        if (job_id, ms) in expected and attempt == 1:
            task_delays.append(started_ms(value) - ms)
            if (job_id, ms) in node_of:
                by_node.setdefault(node_of[(job_id, ms)], []).append(task_delays[-1])
    return Verdict(
        expected=len(expected),
        completed=sum(1 for tick in expected if completed[tick]),
        executions=sum(counted[tick] for tick in expected),
        delays_ms=[float(r["delay_s"]) * 1000 for r in rows if r["delay_s"] is not None],
        task_delays_ms=task_delays,
        missed_ledger=sum(1 for tick in expected if not completed[tick]),
        missed_counter=sum(1 for tick in expected if not counted[tick]),
        dup_ledger=sum(1 for n in completed.values() if n > 1),
        dup_counter=sum(1 for tick in expected if counted[tick] > 1),
        finished_in_window=int(await conn.fetchval(FINISHED_IN, *window.bounds)),
        window_states=dict(Counter(r["state"] for r in rows)),
        all_states={r["state"]: int(r["n"]) for r in await conn.fetch(STATE_COUNTS)},
        shares=dict.fromkeys(nodes, 0) | Counter(r["node_id"] or "?" for r in ran),
        node_task_delays_ms=by_node,
    )


def _states(counts: dict[str, int]) -> str:
    return ", ".join(f"{state} {n:,}" for state, n in sorted(counts.items())) or "none"


def _mb(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:.0f} MB"


def _cpu(value: float | None, seconds: float) -> tuple[str, str]:
    return ("n/a", "n/a") if value is None else (f"{value:.2f}", f"{100 * value / seconds:.1f}%")


def total_cpu_s(cpu_s: dict[str, float | None]) -> float:
    """CPU seconds of every process measured (the roles, PostgreSQL's backends, redis-server); n/a counts 0."""
    return sum(value for value in cpu_s.values() if value is not None)


def delays_text(values: Sequence[float]) -> str:
    """p50, p99 and max of a list of delays in ms."""
    return f"p50 {pct(values, 0.5):.1f} ms, p99 {pct(values, 0.99):.1f} ms, max {max(values, default=0):.1f} ms"


def shares_text(shares: dict[str, int]) -> str:
    """Each executor's count and share of the runs: `bench-executor-1 1,510 (50.3%), ...`."""
    total = sum(shares.values()) or 1
    return ", ".join(f"{node} {n:,} ({100 * n / total:.1f}%)" for node, n in sorted(shares.items())) or "none"


def _by_node(delays: dict[str, list[float]]) -> str:
    return "; ".join(
        f"{node} p50 {pct(d, 0.5):.1f} ms, p99 {pct(d, 0.99):.1f} ms" for node, d in sorted(delays.items())
    )


def render(
    verdict: Verdict,
    window: Window,
    cpu_s: dict[str, float | None],
    rss: dict[str, int | None],
    backends: int,
) -> str:
    ticks = len(window.ticks_ms)
    start, end = (bound.strftime("%H:%M:%S.%f")[:-3] for bound in window.bounds)
    total_s, runs = total_cpu_s(cpu_s), max(verdict.finished_in_window, 1)
    summary = [
        ("start delay at the task", f"{delays_text(verdict.task_delays_ms)} (task start - tick)"),
        (
            "start delay at the claim",
            f"{delays_text(verdict.delays_ms)} (started_at - scheduled_for: as the API, CLI, console and"
            " cronos_run_start_delay_seconds show it)",
        ),
        ("window", f"{start} -> {end} UTC ({ticks} ticks per job)"),
        ("executions / expected", f"{verdict.executions:,} / {verdict.expected:,} (counted executions)"),
        ("completed runs / expected", f"{verdict.completed:,} / {verdict.expected:,} (ledger)"),
        ("missed ticks", f"{verdict.missed_ledger} (ledger), {verdict.missed_counter} (counter)"),
        ("duplicate ticks", f"{verdict.dup_ledger} (ledger), {verdict.dup_counter} (counter)"),
        ("runs/s", f"{verdict.finished_in_window / window.seconds:,.1f} (completed runs finished in the window)"),
        ("executor shares", f"{shares_text(verdict.shares)} (completed runs of the window's ticks, by node_id)"),
        ("at the task, by executor", _by_node(verdict.node_task_delays_ms)),
        (
            "cpu per run",
            f"{1000 * total_s / runs:.3f} ms (every process below, over the runs finished in the window)",
        ),
        ("window run states", _states(verdict.window_states)),
        ("all run states", _states(verdict.all_states) + " (after the stop; queued: written ahead)"),
    ]
    width = max(len(name) for name, _ in summary)
    lines = [f"  {name:<{width}}  {value}" for name, value in summary]
    rows = []
    for name, value in cpu_s.items():
        label = {"postgres": f"postgres ({backends} backends)", "redis": "redis-server"}.get(name, name)
        seconds, share = _cpu(value, window.seconds)
        rows.append([label, seconds, share, _mb(rss[name]) if name in rss else "-"])
    return "\n".join([*lines, "", table(["process", "cpu s", "cpu", "peak RSS"], rows)])
