"""`cronos bench schedule`: next-fire calls per second, Cronos against cronsim, per common form.

In-process and single-threaded (no database, no roles): each form iterates next fire
times from 2026-01-01 for `--calls` calls, `--repeat` times, with Cronos's
`Schedule.next_after` (a fresh Schedule per round, so no cache answers) and with cronsim's
iterator; the table shows the median calls/s of each and their ratio (>= 1.00: Cronos is
at least as fast). cronsim comes with the test extra (`pip install -e '.[test]'`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronos.schedule import Schedule, parse_schedule
from cronos.schedule_legacy import LegacySchedule
from cronos.settings import Settings

FORMS = ("* * * * *", "*/5 * * * *", "0 * * * *", "30 2 * * 1-5", "* * * * * *", "0 9 * * *")
START = datetime(2026, 1, 1)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cronos bench schedule", description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000, help="next-fire calls per round (default 20000)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per form and library; the median is shown")
    parser.add_argument("--zone", default="UTC", help="IANA zone of every form (default UTC)")
    parser.add_argument("--form", action="append", help="a cron expression to measure (repeatable; default: common)")
    parser.add_argument("--legacy", action="store_true", help="also the pre-issue-12 croniter schedule, for comparison")
    return parser


def _cronos(expression: str, zone: str, calls: int, kind: type[Schedule | LegacySchedule] = Schedule) -> float:
    parse_schedule(expression, zone)  # refuses a bad form with its message before timing
    schedule = kind(expression, zone, len(expression.split()) == 6)
    current = START.replace(tzinfo=UTC)
    began = time.perf_counter()
    for _ in range(calls):
        current = schedule.next_after(current)
    return calls / (time.perf_counter() - began)


def _cronsim(expression: str, zone: str, calls: int) -> float:
    from cronsim import CronSim  # the test extra: only this benchmark needs it

    fires = CronSim(expression, START.replace(tzinfo=ZoneInfo(zone)))
    began = time.perf_counter()
    for _ in range(calls):
        next(fires)
    return calls / (time.perf_counter() - began)


def _medians(expression: str, zone: str, args: argparse.Namespace) -> tuple[float, float]:
    """Median calls/s of Cronos and of cronsim, rounds alternating so load on the box hits both."""
    ours, theirs = [], []
    for _ in range(args.repeat):
        ours.append(_cronos(expression, zone, args.calls))
        theirs.append(_cronsim(expression, zone, args.calls))
    return statistics.median(ours), statistics.median(theirs)


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        import cronsim  # noqa: F401
    except ImportError:
        print("cronos bench schedule: cronsim is not installed (pip install -e '.[test]')")
        return 1
    print(f"cronos bench schedule: {args.calls} next-fire calls x {args.repeat} rounds, zone {args.zone}, median")
    header = f"{'form':<16} {'cronos calls/s':>15} {'cronsim calls/s':>16} {'ratio':>6}"
    print(header + "  legacy calls/s" * args.legacy)
    for expression in args.form or FORMS:
        ours, theirs = _medians(expression, args.zone, args)
        line = f"{expression:<16} {ours:>15,.0f} {theirs:>16,.0f} {ours / theirs:>6.2f}"
        if args.legacy:
            legacy = statistics.median(_cronos(expression, args.zone, args.calls, LegacySchedule) for _ in range(3))
            line += f" {legacy:>15,.0f}"
        print(line)
    return 0
