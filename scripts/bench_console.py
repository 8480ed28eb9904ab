"""How the console's jobs page scales: GET /api/jobs/overview over 10,000 jobs and their runs.

    .venv/bin/python scripts/bench_console.py [--jobs 10000] [--runs 30] [--repeat 20]

Creates a database of its own on DATABASE_URL's server (default the local one), migrates it,
inserts the jobs (a tenth paused) and `--runs` finished runs per job in bulk, starts the API on
an ephemeral loopback port, and prints the median and p90 latency of: the first page, a page deep
in the id range, a name search matching one job, a search matching none (it reads every name),
and the status filter. Drops the database after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

import aiohttp
import asyncpg

from api.bodies import encode_cursor
from api.service import ApiService
from cronos.settings import Settings
from cronos.store.db import migrate

_JOBS = (
    "INSERT INTO jobs (name, cron_expression, timezone, payload, status, last_scheduled_for)"
    " SELECT 'job-' || g, (ARRAY['*/5 * * * *', '30 2 * * 1', '@hourly', '0 9-17 * * 1-5'])[1 + g % 4],"
    " (ARRAY['UTC', 'Europe/Berlin', 'America/New_York'])[1 + g % 3], '{\"action\": \"x\"}',"
    " CASE WHEN g % 10 = 0 THEN 'paused' ELSE 'active' END, now() FROM generate_series(1, $1) g"
)
_RUNS = (
    "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, started_at, finished_at, duration_ms)"
    " SELECT j.id, now() - make_interval(mins => r), 1, 'schedule',"
    " CASE WHEN (j.id + r) % 7 = 0 THEN 'failed' ELSE 'completed' END,"
    " now() - make_interval(mins => r), now() - make_interval(mins => r) + interval '3 ms',"
    " now() - make_interval(mins => r) + interval '40 ms', 37.0"
    " FROM jobs j, generate_series(1, $1) r"
)


async def _time(session: aiohttp.ClientSession, url: str, repeat: int) -> list[float]:
    took = []
    for _ in range(repeat):
        start = time.perf_counter()
        async with session.get(url) as resp:
            assert resp.status == 200, await resp.text()
            await resp.read()
        took.append((time.perf_counter() - start) * 1000)
    return took


async def main(jobs: int, runs: int, repeat: int) -> None:
    server = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    admin = server.rsplit("/", 1)[0] + "/postgres"
    name = f"cronos_bench_console_{uuid.uuid4().hex[:8]}"
    dsn = server.rsplit("/", 1)[0] + f"/{name}"
    await migrate(dsn)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            start = time.perf_counter()
            await conn.execute(_JOBS, jobs)
            await conn.execute(_RUNS, runs)
            await conn.execute("ANALYZE jobs; ANALYZE runs")
            count = await conn.fetchval("SELECT count(*) FROM runs")
            print(f"setup: {jobs} jobs, {count} runs in {time.perf_counter() - start:.1f} s")
        finally:
            await conn.close()
        settings = Settings(
            port=0,
            database_url=dsn,
            redis_url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
            key_prefix=f"bench:{uuid.uuid4().hex[:8]}:",
            log_level="WARNING",
            log_format="text",
        )
        async with ApiService(settings, host="127.0.0.1") as api, aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{api.port}/api/jobs/overview"
            await _time(session, f"{base}?limit=50", 3)  # warm the pool and the caches
            cases = {
                "first page (50)": f"{base}?limit=50",
                "page at id 9000 (50)": f"{base}?limit=50&cursor={encode_cursor(int(jobs * 0.9))}",
                "search, one match": f"{base}?q=job-4567&limit=50",
                "search, no match": f"{base}?q=nothing-like-this&limit=50",
                "status=paused (50)": f"{base}?status=paused&limit=50",
            }
            print(f"GET /api/jobs/overview, {repeat} calls each: median / p90 ms")
            for label, url in cases.items():
                took = await _time(session, url, repeat)
                p90 = statistics.quantiles(took, n=10)[-1]
                print(f"  {label:<24} {statistics.median(took):7.2f} / {p90:7.2f}")
    finally:
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30, help="finished runs per job")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.jobs, args.runs, args.repeat))
