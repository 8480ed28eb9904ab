"""How long migration 0009 (runs partitioned by day) holds `runs` on an existing history.

On a scratch database (created on DATABASE_URL's server, dropped after): the migrations
before 0009, --runs finished runs written into the unpartitioned table, VACUUM ANALYZE,
then the remaining migrations, timed; then a check that every row is still there.

    .venv/bin/python scripts/bench_migration.py --runs 10000000
"""

from __future__ import annotations

import argparse
import asyncio
import time

import asyncpg

from cronos.bench.common import Scratch, drop_database, say
from cronos.settings import load_settings
from cronos.store.db import migrate

BEFORE_PARTITIONING = 8


async def main(runs: int) -> int:
    scratch = Scratch.new(load_settings().database_url)
    try:
        await migrate(scratch.dsn, upto=BEFORE_PARTITIONING)
        conn = await asyncpg.connect(scratch.dsn)
        try:
            await conn.execute(
                "INSERT INTO jobs (name, cron_expression)"
                " SELECT 'j' || g, '* * * * * *' FROM generate_series(1, 1000) g"
            )
            started = time.monotonic()
            await conn.execute(
                "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at, finished_at)"
                " SELECT (SELECT min(id) FROM jobs) + g % 1000,"
                " now() - interval '40 days' + (g / 1000) * interval '346 s',"
                " 'schedule', 'completed', now(), now() FROM generate_series(0, $1::int - 1) g",
                runs,
            )
            await conn.execute("VACUUM ANALYZE runs")
            size = await conn.fetchval("SELECT pg_size_pretty(pg_total_relation_size('runs'))")
            say(f"{runs:,} runs written in {time.monotonic() - started:.1f} s ({size})")
        finally:
            await conn.close()
        started = time.monotonic()
        applied = await migrate(scratch.dsn)
        say(f"migrations {applied} applied in {time.monotonic() - started:.1f} s")
        conn = await asyncpg.connect(scratch.dsn)
        try:
            kept = await conn.fetchval("SELECT count(*) FROM runs")
        finally:
            await conn.close()
        say(f"runs after: {kept:,}")
        return 0 if kept == runs else 1
    finally:
        await drop_database(scratch.server_dsn, scratch.db_name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000_000)
    raise SystemExit(asyncio.run(main(parser.parse_args().runs)))
