"""`cronos bench compare`: an in-process APScheduler 3, then Cronos end to end, in the same sitting.

    cronos bench compare --jobs 1000 --duration 30
    cronos bench compare --jobs 1000 --duration 30 --executors 2

Runs `cronos bench apscheduler` (no-op jobs, CronTrigger(second='*'), APScheduler's defaults)
and right after it `cronos bench e2e` (no-op jobs, Cronos's defaults) with the same --jobs,
--duration and --warmup, prints both reports, then the two side by side with the ratio Cronos /
APScheduler of the start delay at the task (p50, p99, max) and of the CPU per run: Cronos's is
every process it needs (api, dispatcher, executors, the database's PostgreSQL backends and
redis-server), APScheduler's its own process. The machine's speed drifts within the hour, so
only figures measured together are compared. Exits 1 when Cronos missed or duplicated a tick
(as `cronos bench e2e`); APScheduler's misses are reported, not judged.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cronos.bench import apscheduler, e2e
from cronos.bench.common import pct, say, table
from cronos.bench.window import total_cpu_s
from cronos.errors import ConfigError
from cronos.settings import Settings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronos bench compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, default=1000, help="jobs, each firing every second (both schedulers)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds measured, after the warm-up (each)")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds between the start and the window (each)")
    p.add_argument("--executors", type=int, default=1, help="Cronos's executor processes")
    p.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="set a variable on every Cronos role"
    )
    return p


def _ratio(cronos: float, aps: float) -> str:
    return f"{cronos / aps:.2f}" if aps > 0 else "n/a"


def render(aps: apscheduler.Result, cronos: e2e.Result) -> str:
    """The two side by side: start delay at the task, misses, runs/s, CPU per run; ratios Cronos / APScheduler."""
    a, c = aps.verdict, cronos.verdict
    c_cpu_ms = 1000 * total_cpu_s(cronos.cpu_s) / max(c.finished_in_window, 1)
    rows: list[list[object]] = []
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        x, y = pct(a.delays_ms, q), pct(c.task_delays_ms, q)
        rows.append([f"start delay at the task {name}", f"{x:.1f} ms", f"{y:.1f} ms", _ratio(y, x)])
    x, y = max(a.delays_ms, default=0.0), max(c.task_delays_ms, default=0.0)
    rows.append(["start delay at the task max", f"{x:.1f} ms", f"{y:.1f} ms", _ratio(y, x)])
    rows.append(
        ["missed / duplicate ticks", f"{a.missed} / {a.duplicates}", f"{c.missed_counter} / {c.dup_counter}", ""]
    )
    rows.append(["runs/s", f"{a.runs_per_s:,.1f}", f"{c.finished_in_window / cronos.window.seconds:,.1f}", ""])
    rows.append(["cpu per run", f"{a.cpu_per_run_ms:.3f} ms", f"{c_cpu_ms:.3f} ms", _ratio(c_cpu_ms, a.cpu_per_run_ms)])
    notes = (
        "cpu per run: APScheduler's process; Cronos's api, dispatcher, executors, PostgreSQL backends and"
        " redis-server (n/a ones count 0)"
    )
    return table(["", "APScheduler 3", "Cronos", "Cronos / APScheduler"], rows) + "\n" + notes


async def _main(settings: Settings, args: argparse.Namespace, env: dict[str, str]) -> int:
    e2e.stop_on_sigterm()
    say("APScheduler 3 first, then Cronos, in the same sitting")
    common = ["--jobs", str(args.jobs), "--duration", str(args.duration), "--warmup", str(args.warmup)]
    aps = await apscheduler.measure(apscheduler.parser().parse_args(common))
    print(f"\ncronos bench apscheduler --jobs {args.jobs} --duration {args.duration:g} ({aps.setup})")
    print(apscheduler.render(aps), "\n", flush=True)
    e2e_args = e2e.parser().parse_args([*common, "--executors", str(args.executors)])
    cronos = await e2e.E2E(settings, e2e_args, env).run()
    head = f"cronos bench compare --jobs {args.jobs} --duration {args.duration:g} --executors {args.executors}"
    print(f"\n{head}: APScheduler 3 then Cronos, same sitting")
    print(render(aps, cronos), flush=True)
    return 1 if cronos.verdict.failed else 0


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.jobs < 1 or args.executors < 1 or args.duration <= 0 or args.warmup < 1:
        print("cronos bench compare: --jobs, --executors >= 1, --duration > 0, --warmup >= 1", file=sys.stderr)
        return 2
    try:
        apscheduler.require()
        env = e2e.role_env(args.env)
    except ConfigError as exc:
        print(f"cronos bench compare: {exc}", file=sys.stderr)
        return 2
    return e2e.run_to_exit(_main(settings, args, env), keep=False, prog="cronos bench compare")
