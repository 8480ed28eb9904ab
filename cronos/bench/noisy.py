"""`cronos bench e2e --noisy S`: two jobs that write a lot of run output, beside the no-op load.

- `bench-noisy-log`: the task `bench.chatty`, which logs LOG_LINES (1,000) lines through `ctx.logger`;
- `bench-noisy-shell`: a shell job printing SHELL_BYTES (10 MB) of 50-byte lines on its stdout.

Both fire every S seconds. The benchmark measures its window twice, first with the two jobs
paused (the no-op load alone), then with them running, and sets the two side by side: the
no-op jobs' start delay at the task, the CPU per run of every process and each role's CPU. What
the noisy jobs cost is the difference; their runs' states and the output rows they left are
printed under the table. Executors load this module (`--import cronos.bench.noisy`) and allow
shell jobs (CRONOS_ALLOW_SHELL=1, on the API too) only with --noisy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cronos
from cronos.bench.common import pct, table
from cronos.bench.window import Verdict, Window, total_cpu_s

CHATTY_TASK = "bench.chatty"
LOG_LINES = 1000
SHELL_BYTES = 10_000_000
SHELL_LINE = "noisy shell output, fifty bytes to a line: 0123456"  # 49 characters and its newline
# $1: the noisy jobs' ids; their runs by state, and the output lines they kept.
NOISY_RUNS = "SELECT state, count(*) AS n FROM runs WHERE job_id = ANY($1::bigint[]) GROUP BY state ORDER BY state"
NOISY_LINES = (
    "SELECT count(*) FROM run_output o JOIN runs r ON r.id = o.run_id AND r.scheduled_for = o.scheduled_for"
    " WHERE r.job_id = ANY($1::bigint[])"
)


@cronos.task(CHATTY_TASK, replace=True)
async def chatty(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    for i in range(int(payload.get("lines", LOG_LINES))):
        ctx.logger.info("line %d of a chatty task's output: some words to make it a typical log line", i)


def job_bodies(period_s: int) -> list[dict[str, Any]]:
    """The two noisy jobs, paused (resumed when the second window opens)."""
    every = f"{period_s}s"
    return [
        {"name": "bench-noisy-log", "every": every, "status": "paused", "payload": {"action": CHATTY_TASK}},
        {
            "name": "bench-noisy-shell",
            "every": every,
            "status": "paused",
            "kind": "shell",
            "payload": {"argv": ["sh", "-c", f"yes '{SHELL_LINE}' | head -c {SHELL_BYTES}"]},
        },
    ]


@dataclass(frozen=True, slots=True)
class Phase:
    """One measured window of the no-op jobs: without the noisy jobs, or with them."""

    name: str
    verdict: Verdict
    window: Window
    cpu_s: dict[str, float | None]


def side_by_side(phases: list[Phase]) -> str:
    """The no-op jobs' start delay at the task, the CPU per run and each role's CPU, a phase a row."""
    roles = [name for name in phases[0].cpu_s if name.startswith(("executor", "postgres"))]
    rows = []
    for phase in phases:
        runs = max(phase.verdict.finished_in_window, 1)
        delays = phase.verdict.task_delays_ms
        cpu = [phase.cpu_s.get(name) for name in roles]
        rows.append(
            [
                phase.name,
                f"{phase.verdict.completed:,}",
                f"{pct(delays, 0.5):.1f} ms",
                f"{pct(delays, 0.99):.1f} ms",
                f"{1000 * total_cpu_s(phase.cpu_s) / runs:.3f} ms",
                *("n/a" if s is None else f"{s:.2f}" for s in cpu),
            ]
        )
    headers = [
        "no-op jobs",
        "runs",
        "p50 at the task",
        "p99 at the task",
        "cpu per run",
        *(f"{r} cpu s" for r in roles),
    ]
    return table(headers, rows)


def states_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{state} {n:,}" for state, n in counts.items()) or "none"
