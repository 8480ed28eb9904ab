"""`cronos bench apscheduler`: an in-process APScheduler 3, measured as `cronos bench e2e` measures Cronos.

    cronos bench apscheduler --jobs 1000 --duration 30
    cronos bench apscheduler --jobs 1000 --duration 30 --trigger interval

APScheduler 3.x (the `bench` extra: `.venv/bin/pip install -e '.[bench]'`) set up as a user
without persistence would: an AsyncIOScheduler on this process's asyncio loop with its default
MemoryJobStore and AsyncIOExecutor and the default job options (misfire_grace_time 1 s,
coalesce on, max_instances 1; the report prints the values a job got), N jobs firing every
whole second (CronTrigger(second='*'), or --trigger interval: IntervalTrigger(seconds=1)
started on a whole second). Each job is a no-op coroutine whose first statement stamps its
wall-clock start. APScheduler does not hand the fire time to the function: a listener on
EVENT_JOB_SUBMITTED (whose event carries the scheduled run times) notes it for the job, and
the job's next start takes it (one instance of a job at a time, one run time per submission
with coalesce on). APScheduler's own log lines are kept to errors (a missed run time is
counted, not logged).

After --warmup seconds it measures --duration seconds, waits (up to --settle s) for the window's
ticks to run and prints the start delay at the task p50/p99/max (task start - scheduled fire
time), executions / expected, missed ticks (a tick of the window that never ran) and
duplicates (ran more than once), runs/s and this process's CPU per run (APScheduler, the loop
and the bookkeeping: all the CPU its runs cost). Exits 1 on a missed or duplicated tick.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cronos.bench.common import say
from cronos.bench.window import Window, delays_text
from cronos.errors import ConfigError
from cronos.settings import Settings

Tick = tuple[int, int]  # (job, scheduled fire time in epoch ms)


def parser(prog: str = "cronos bench apscheduler") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=100, help="jobs, each firing every second")
    p.add_argument("--duration", type=float, default=60.0, help="seconds measured, after the warm-up")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds between the start and the window")
    p.add_argument("--settle", type=float, default=10.0, help="longest wait for the window's ticks to run")
    p.add_argument("--progress", type=float, default=5.0, help="seconds between progress lines")
    p.add_argument("--trigger", choices=["cron", "interval"], default="cron", help="CronTrigger or IntervalTrigger")
    return p


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, if anything."""
    if args.jobs < 1 or args.duration <= 0 or args.warmup < 1 or args.settle < 0:
        return "--jobs must be >= 1, --duration > 0, --warmup >= 1 (every job fires once before the window)"
    return None


def require() -> Any:
    """The apscheduler package, imported only when this benchmark runs (it is an optional extra)."""
    try:
        import apscheduler
    except ModuleNotFoundError:
        raise ConfigError("APScheduler 3 is not installed: .venv/bin/pip install -e '.[bench]'") from None
    if not str(apscheduler.__version__).startswith("3."):
        raise ConfigError(f"this benchmark needs APScheduler 3.x, found {apscheduler.__version__}")
    return apscheduler


@dataclass
class Ledger:
    """Which tick each job's next start is for, and every start of every tick."""

    pending: dict[int, deque[int]] = field(default_factory=dict)  # job -> run times submitted, not started (ms)
    delays: dict[Tick, list[float]] = field(default_factory=dict)  # tick -> start delays at the task (ms)
    unmatched: int = 0  # starts with no submitted run time (none expected)

    def submitted(self, job: int, run_times_ms: Sequence[int]) -> None:
        # A job's submissions never overlap (max_instances 1): one that was skipped as missed
        # (later than its grace when the coroutine got to it) is replaced, not left in front.
        self.pending[job] = deque(run_times_ms)

    def started(self, job: int, started_us: int) -> None:
        queue = self.pending.get(job)
        if not queue:
            self.unmatched += 1
            return
        ms = queue.popleft()
        self.delays.setdefault((job, ms), []).append(started_us / 1000 - ms)

    @property
    def executions(self) -> int:
        return sum(len(d) for d in self.delays.values())


@dataclass(frozen=True, slots=True)
class Verdict:
    expected: int
    executions: int  # executions of the expected ticks
    delays_ms: list[float]  # the first start of each expected tick that ran - the tick
    missed: int
    duplicates: int
    seconds: float
    cpu_s: float  # this process's CPU over the window

    @property
    def failed(self) -> bool:
        return bool(self.missed or self.duplicates)

    @property
    def runs_per_s(self) -> float:
        return self.executions / self.seconds

    @property
    def cpu_per_run_ms(self) -> float:
        return 1000 * self.cpu_s / max(self.executions, 1)


def judge(ledger: Ledger, jobs: int, window: Window, cpu_s: float) -> Verdict:
    expected = [(job, ms) for job in range(jobs) for ms in window.ticks_ms]
    ran = [ledger.delays.get(tick, []) for tick in expected]
    return Verdict(
        expected=len(expected),
        executions=sum(len(d) for d in ran),
        delays_ms=[d[0] for d in ran if d],
        missed=sum(1 for d in ran if not d),
        duplicates=sum(1 for d in ran if len(d) > 1),
        seconds=window.seconds,
        cpu_s=cpu_s,
    )


@dataclass(frozen=True, slots=True)
class Result:
    verdict: Verdict
    window: Window
    setup: str  # what ran: version, scheduler, store, executor, trigger, job options


async def measure(args: argparse.Namespace) -> Result:
    """Run the scheduler for --warmup + --duration seconds (and the settle); its figures over the window."""
    aps = require()
    from apscheduler.events import EVENT_JOB_SUBMITTED
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    ledger = Ledger()

    async def task(job: int) -> None:
        started_us = time.time_ns() // 1000  # the first statement: the user's code starts here (wall clock)
        ledger.started(job, started_us)

    def on_submitted(event: Any) -> None:
        ledger.submitted(int(event.job_id), [round(t.timestamp() * 1000) for t in event.scheduled_run_times])

    scheduler = AsyncIOScheduler()  # defaults: MemoryJobStore, AsyncIOExecutor, the default job options
    scheduler.add_listener(on_submitted, EVENT_JOB_SUBMITTED)
    first = datetime.fromtimestamp(math.floor(time.time()) + 1, UTC)
    for i in range(args.jobs):
        trigger = CronTrigger(second="*") if args.trigger == "cron" else IntervalTrigger(seconds=1, start_date=first)
        scheduler.add_job(task, trigger, args=[i], id=str(i), name=f"bench-{i:06d}")
    scheduler.start()
    job = scheduler.get_jobs()[0]  # the job options are filled in from the defaults at the start
    setup = (
        f"APScheduler {aps.__version__}: AsyncIOScheduler, MemoryJobStore, AsyncIOExecutor,"
        f" {'CronTrigger(second=*)' if args.trigger == 'cron' else 'IntervalTrigger(seconds=1)'};"
        f" job options misfire_grace_time {job.misfire_grace_time} s, coalesce {job.coalesce},"
        f" max_instances {job.max_instances}"
    )
    say(f"started {args.jobs:,} jobs on {setup}; warming up for {args.warmup:g} s")
    try:
        await _watch(ledger, time.time(), time.time() + args.warmup, args.progress)
        window = Window(time.time(), time.time() + args.duration)
        cpu_start = time.process_time()
        say(f"measuring for {args.duration:g} s")
        await _watch(ledger, window.start, window.end, args.progress)
        cpu_s = time.process_time() - cpu_start
        await _settle(ledger, args.jobs, window, args.settle)
    finally:
        scheduler.shutdown(wait=False)
        await asyncio.sleep(0)  # the shutdown is scheduled on the loop: let it run
    return Result(judge(ledger, args.jobs, window, cpu_s), window, setup)


async def _watch(ledger: Ledger, since: float, until: float, every: float) -> None:
    next_line = time.monotonic() + every
    cpu_start, runs_start = time.process_time(), ledger.executions
    while (left := until - time.time()) > 0:
        await asyncio.sleep(min(1.0, left))
        if time.monotonic() >= next_line or time.time() >= until:
            next_line = time.monotonic() + every
            elapsed = max(time.time() - since, 1e-3)
            runs = ledger.executions - runs_start
            say(
                f"  +{elapsed:4.0f}s executions {runs:,} ({runs / elapsed:,.0f}/s);"
                f" cpu {100 * (time.process_time() - cpu_start) / elapsed:.0f}%"
            )


async def _settle(ledger: Ledger, jobs: int, window: Window, settle_s: float) -> None:
    """Until every tick of the window ran (a missed one never will: then --settle s)."""
    deadline = time.monotonic() + settle_s
    ticks = window.ticks_ms
    while time.monotonic() < deadline:
        if all((job, ms) in ledger.delays for job in range(jobs) for ms in ticks):
            return
        await asyncio.sleep(0.2)
    say(f"the window's ticks did not all run within --settle {settle_s:g} s")


def render(result: Result) -> str:
    v, window = result.verdict, result.window
    start, end = (bound.strftime("%H:%M:%S.%f")[:-3] for bound in window.bounds)
    summary = [
        ("start delay at the task", f"{delays_text(v.delays_ms)} (task start - scheduled fire time)"),
        ("window", f"{start} -> {end} UTC ({len(window.ticks_ms)} ticks per job)"),
        ("executions / expected", f"{v.executions:,} / {v.expected:,}"),
        ("missed ticks", str(v.missed)),
        ("duplicate ticks", str(v.duplicates)),
        ("runs/s", f"{v.runs_per_s:,.1f} (executions of the window's ticks)"),
        (
            "cpu per run",
            f"{v.cpu_per_run_ms:.3f} ms (this process: {v.cpu_s:.2f} s over the window,"
            f" {100 * v.cpu_s / v.seconds:.1f}% of a core)",
        ),
    ]
    width = max(len(name) for name, _ in summary)
    return "\n".join(f"  {name:<{width}}  {value}" for name, value in summary)


async def _main(args: argparse.Namespace) -> int:
    result = await measure(args)
    print(f"\ncronos bench apscheduler --jobs {args.jobs} --duration {args.duration:g} ({result.setup})")
    print(render(result), flush=True)
    return 1 if result.verdict.failed else 0


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if (problem := check(args)) is not None:
        print(f"cronos bench apscheduler: {problem}", file=sys.stderr)
        return 2
    try:
        require()
    except ConfigError as exc:
        print(f"cronos bench apscheduler: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        print("cronos bench apscheduler: interrupted", file=sys.stderr)
        return 130
