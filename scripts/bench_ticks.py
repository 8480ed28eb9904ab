"""What a GET /api/jobs/{id}/ticks request costs in Python: the window's tick count check and a page.

    .venv/bin/python scripts/bench_ticks.py [--repeat 7]

For an every-second job (UTC and Europe/Berlin) and an every-30-seconds one (America/New_York),
prints the median time of planning the window's ticks up to the bound (10,001: the route's check
that the window holds at most 10,000 ticks) and of one 500-tick page (plan, match with 500 ledger
rows, DST notes). The SQL side is checked by tests/integration/test_query_plans.py (TICK_RUNS
reads the page's rows only).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from api.routes_ticks import MAX_TICKS, annotate
from cronos.ticks import LedgerRow, account, plan, segments

SECOND = timedelta(seconds=1)


@dataclass
class _Revision:
    number: int
    at: datetime
    status: str
    changes: dict[str, Any] = field(default_factory=dict)


def _rows(after: datetime, count: int) -> list[LedgerRow]:
    return [
        LedgerRow(id=i, scheduled_for=after + i * SECOND, attempt=1, trigger="schedule", revision=1,
                  state="completed", started_at=after + i * SECOND + timedelta(milliseconds=5), skip_reason=None)
        for i in range(1, count + 1)
    ]  # fmt: skip


def main(repeat: int) -> None:
    start = datetime(2026, 5, 4, tzinfo=UTC)
    for expression, zone in (("* * * * * *", "UTC"), ("* * * * * *", "Europe/Berlin"),
                             ("*/30 * * * * *", "America/New_York")):  # fmt: skip
        segs = segments([_Revision(1, start, "active", {"cron_expression": expression, "timezone": zone})])
        after, until = start + 10 * SECOND, start + timedelta(days=7)
        rows = _rows(after, 500)
        bound, page = [], []
        for _ in range(repeat):
            began = time.perf_counter()
            count = len(plan(segs, after, until, MAX_TICKS + 1))
            bound.append(time.perf_counter() - began)
            began = time.perf_counter()
            ticks = account(plan(segs, after, until, 500), rows, segs, now=until, written_until=until)
            [annotate(t) for t in ticks]
            page.append(time.perf_counter() - began)
        print(f"{expression!r} in {zone}: planning {count} ticks median {statistics.median(bound) * 1000:.1f} ms;"
              f" a 500-tick page median {statistics.median(page) * 1000:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    main(parser.parse_args().repeat)
