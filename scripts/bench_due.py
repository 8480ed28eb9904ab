"""What the leader's runs-due gauges cost (dispatcher.due_gauge): one pass over a schedule book.

    .venv/bin/python scripts/bench_due.py [--jobs 100000] [--repeat 7]

In-process, no services: a schedule book loaded as the leader loads it, then `compute` (the groups
due within 300 s, their fire times and verdicts, the counts per queue) timed at instants spread over
an hour, each after the leader's rounds up to it (cursors where the leader keeps them). Four
shapes of `--jobs` jobs on 10 queues, from one group to one group per job:

- herd: every job at `* * * * *` (one group);
- cron mix: hourly and daily jobs at random minutes and hours, a tenth every minute, a hundredth
  every second (about 1,500 groups);
- intervals: every job `every 1h` with its own anchor, to the millisecond (one group per job: the
  worst case);
- calendars: the cron mix under a weekday calendar and a recurring defer blackout.

Prints the median and the slowest pass in milliseconds, and the groups each pass read. A pass runs
every dispatcher.due_gauge.INTERVAL_S (5 s): its share of one core is the median over that. A pass
yields to the event loop every dispatcher.due_gauge.CHUNK groups, so it holds the loop for at most
about (median / groups read) x CHUNK.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from cronos.models import DispatchJob
from cronos.rules import Blackout, Calendar, CalendarRef, RuleBook
from dispatcher.due_ahead import HORIZONS_S
from dispatcher.due_gauge import INTERVAL_S, compute
from dispatcher.schedule_book import ScheduleBook

START = datetime(2026, 3, 2, 9, 0, 7, tzinfo=UTC)  # a Monday


def _job(job_id: int, cron: str | None, **kw: object) -> DispatchJob:
    fields: dict[str, object] = {
        "timezone": "UTC", "misfire_policy": "run_once", "misfire_grace_s": 60.0, "jitter_s": 0.0,
        "concurrency_policy": "forbid", "status": "active", "queue": f"q{job_id % 10}", "name": f"j{job_id}",
    }  # fmt: skip
    fields.update(kw)
    return DispatchJob(id=job_id, cron_expression=cron, cursor=START, **fields)  # type: ignore[arg-type]


def _mixed_cron(rng: random.Random, job_id: int) -> str:
    roll = rng.random()
    if roll < 0.01:
        return "* * * * * *"
    if roll < 0.11:
        return "* * * * *"
    if roll < 0.6:
        return f"{rng.randrange(60)} * * * *"
    return f"{rng.randrange(60)} {rng.randrange(24)} * * *"


def herd(n: int, rng: random.Random) -> list[DispatchJob]:
    return [_job(i, "* * * * *") for i in range(1, n + 1)]


def cron_mix(n: int, rng: random.Random) -> list[DispatchJob]:
    return [_job(i, _mixed_cron(rng, i)) for i in range(1, n + 1)]


def intervals(n: int, rng: random.Random) -> list[DispatchJob]:
    anchors = [START - timedelta(milliseconds=rng.randrange(3_600_000)) for _ in range(n)]
    return [_job(i, None, every="1h", anchor=anchor) for i, anchor in enumerate(anchors, 1)]


def calendars(n: int, rng: random.Random) -> list[DispatchJob]:
    ref = [CalendarRef(name="weekdays", mode="allow")]
    return [_job(i, _mixed_cron(rng, i), calendars=ref) for i in range(1, n + 1)]


SHAPES: dict[str, Callable[[int, random.Random], list[DispatchJob]]] = {
    "herd": herd,
    "cron mix": cron_mix,
    "intervals": intervals,
    "calendars": calendars,
}
RULES = RuleBook.of(
    [Calendar(name="weekdays", weekdays=["mon", "tue", "wed", "thu", "fri"])],
    [Blackout(id=1, name="nightly", action="defer", cron_expression="0 2 * * *", duration_s=1800)],
)


def _tick(book: ScheduleBook, now: datetime) -> None:
    """The leader's rounds up to `now` (a second ahead, as it writes), every batch committed."""
    while True:
        with book.round(now, horizon=now + timedelta(seconds=1), max_rows=10_000_000) as ticks:
            for batch in ticks:
                book.advance(batch)
        if not ticks.truncated:
            return


def measure(shape: str, jobs: int, repeat: int) -> tuple[int, float, float, int, float]:
    """(groups, median ms, slowest ms, groups read by the last pass, seconds to load the book)."""
    book = ScheduleBook()
    if shape == "calendars":
        book.rule_book = RULES
    specs = SHAPES[shape](jobs, random.Random(27))
    began = time.perf_counter()
    book.apply(specs, ())
    loaded = time.perf_counter() - began
    times, read = [], 0
    for k in range(repeat):
        now = START + timedelta(seconds=k * 3600 / repeat + 0.4)
        _tick(book, now)
        read = len(book.ahead(now + timedelta(seconds=max(HORIZONS_S))))
        began = time.perf_counter()
        asyncio.run(compute(book, now))
        times.append((time.perf_counter() - began) * 1000)
    return book.group_count, statistics.median(times), max(times), read, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7, help="passes per shape, spread over an hour")
    parser.add_argument("--shape", action="append", choices=list(SHAPES), help="default: every shape")
    args = parser.parse_args()
    print(f"bench_due: {args.jobs:,} jobs, {args.repeat} passes per shape, a pass every {INTERVAL_S:g} s")
    print(f"{'shape':<10} {'groups':>8} {'read':>7} {'median ms':>10} {'max ms':>8} {'core %':>7} {'load s':>7}")
    for shape in args.shape or list(SHAPES):
        book_groups, median, slowest, read, loaded = measure(shape, args.jobs, args.repeat)
        share = median / 1000 / INTERVAL_S * 100
        print(f"{shape:<10} {book_groups:>8,} {read:>7,} {median:>10.2f} {slowest:>8.2f} {share:>7.3f} {loaded:>7.2f}")


if __name__ == "__main__":
    main()
