"""The leader's tick write (TICKS_WRITE) as it is now against its text at another commit: median
ms for a batch of ticks, the two alternating round by round on one database.

    .venv/bin/python scripts/bench_tick_write.py [--base 1f13302] [--jobs 10000] [--rounds 20]

Written for migration 0015 (queues), whose statement returns each tick's job queue: it shows
what that lookup costs on the hot path. Creates a database of its own on DATABASE_URL's server
(default the local one), migrates it, inserts `--jobs` every-second jobs, and writes one tick per
job each round (every round a later second, so each statement inserts every row). Drops the
database after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import time
from datetime import UTC, datetime, timedelta

import asyncpg

from cronos.bench.common import Scratch, scratch_database
from cronos.models import SKIP_PENDING
from cronos.store.queries import runs as runs_q

_JOBS = (
    "INSERT INTO jobs (name, cron_expression, payload, last_scheduled_for)"
    " SELECT 'job-' || g, '* * * * * *', '{}', $1 FROM generate_series(1, $2::int) g"
)


def _path_at(commit: str) -> str:
    """Where TICKS_WRITE was defined at `commit` (queries.py was split by aggregate)."""
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", commit, "cronos/store/queries/runs.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return listed or "cronos/store/queries.py"


def _statement_at(commit: str) -> str:
    """TICKS_WRITE as cronos/store/queries.py defined it at `commit`."""
    source = subprocess.run(
        ["git", "show", f"{commit}:{_path_at(commit)}"], capture_output=True, text=True, check=True
    ).stdout
    scope: dict[str, object] = {}
    exec(compile(source, f"{commit}:{_path_at(commit)}", "exec"), scope)  # our own file, at a commit
    return str(scope["TICKS_WRITE"])


async def main(base: str, jobs: int, rounds: int) -> None:
    statements = {base: _statement_at(base), "now": runs_q.TICKS_WRITE}
    server = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    async with scratch_database(Scratch.new(server)) as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            took = await _rounds(conn, statements, jobs, rounds)
        finally:
            await conn.close()
    for label, times in took.items():
        print(f"TICKS_WRITE at {label:>8}: {jobs} ticks, median {statistics.median(times):.1f} ms over {rounds}")
    print(f"now / {base}: {statistics.median(took['now']) / statistics.median(took[base]):.2f}")


async def _rounds(
    conn: asyncpg.Connection, statements: dict[str, str], jobs: int, rounds: int
) -> dict[str, list[float]]:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    await conn.execute(_JOBS, start, jobs)
    ids = [r[0] for r in await conn.fetch("SELECT id FROM jobs ORDER BY id")]
    took: dict[str, list[float]] = {label: [] for label in statements}
    second = 0
    for n in range(rounds + 2):  # the first two rounds warm caches and plans: not counted
        order = list(statements.items())
        for label, sql in order if n % 2 else order[::-1]:
            second += 1
            tick = [start + timedelta(seconds=second)] * len(ids)
            began = time.perf_counter()
            args: list[object] = [1, ids, tick, tick, [None] * len(ids), [2**30] * len(ids)]
            if "$9" in sql:  # one pending run (issue 38): every job of the default policies, probed
                args += [[tick[0] - timedelta(seconds=60)] * len(ids), SKIP_PENDING, tick[0] - timedelta(seconds=1)]
            rows = await conn.fetch(sql, *args)
            if n >= 2:
                took[label].append((time.perf_counter() - began) * 1000)
            assert len(rows) == len(ids), (label, len(rows))
    return took


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="1f13302", help="the commit to compare with")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.base, args.jobs, args.rounds))
