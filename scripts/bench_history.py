"""Bounded history (issue 13, item 3): does a runs table holding millions of old runs slow the
hot path, and what does a retention pass give back?

On a scratch database (created on DATABASE_URL's server, dropped after) with one runs
partition per UTC day from --days ago through three days ahead and --jobs jobs, it measures
twice, first with no history, then after loading --history finished runs spread over those
days (each day built apart with generate_series and attached, as a bulk load would be):

* claim and finish throughput: rounds of one queued run per job, claimed in one batch and
  finished in one batch through RunStore, as executors do (median runs/s over the rounds);
* `GET /api/jobs/{id}/runs` latency from a `cronos api` process (p50/p99 over --requests
  requests on random jobs, after a warm-up);

then the size of runs on disk before and after one retention pass (dispatcher.retention)
at CRONOS_RUNS_RETENTION's default of 30 days. The target: every figure within 20 % of the
empty table's.

    .venv/bin/python scripts/bench_history.py                       # 10 million runs, 40 days
    .venv/bin/python scripts/bench_history.py --history 1000000 --rounds 10
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import asyncpg

from cronos.bench.common import (
    Scratch,
    clean_environ,
    cronos_argv,
    free_port,
    package_root,
    pct,
    say,
    scratch_database,
    stop_processes,
    table,
)
from cronos.settings import load_settings
from cronos.store.db import connect
from cronos.store.epoch import EpochStore
from cronos.store.partitions import Change, PartitionStore
from cronos.store.runs import Outcome, RunStore
from dispatcher import retention

DAY = timedelta(days=1)
RETENTION_S = 30 * 86_400.0
TARGET = 0.20

# One day of history, built apart: $1 first id, $2 runs, $3 jobs, $4 day start, $5 first job id.
# Runs of a job are spaced evenly over the day; 97 % completed, 2 % failed, 1 % skipped.
LOAD_DAY = (
    'INSERT INTO "{name}" (id, job_id, scheduled_for, attempt, trigger, state, due_at, exclusive, node_id, epoch,'
    " started_at, finished_at, duration_ms, error, result, skip_reason, created_at)"
    " SELECT $1::bigint + g, $5::bigint + g % $3::int, t, 1, 'schedule', s, t, true,"
    " CASE WHEN s <> 'skipped' THEN 'node-1' END, 1,"
    " t + interval '3 ms', t + interval '40 ms', 37.5, CASE WHEN s = 'failed' THEN 'boom' END,"
    " CASE WHEN s = 'completed' THEN '{{\"ok\": true}}' END, CASE WHEN s = 'skipped' THEN 'expired' END, t"
    " FROM generate_series(0, $2::int - 1) g,"
    " LATERAL (SELECT $4::timestamptz + (g / $3::int) * (interval '1 day' / greatest(1, $2::int / $3::int)) AS t,"
    " CASE WHEN g % 100 < 97 THEN 'completed' WHEN g % 100 < 99 THEN 'failed' ELSE 'skipped' END AS s) x"
)
RUNS_SIZE = (
    "SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0)::bigint FROM pg_inherits"
    " WHERE inhparent = 'runs'::regclass"
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--history", type=int, default=10_000_000, help="historical runs to load")
    p.add_argument("--days", type=int, default=40, help="days of history (the oldest past retention are dropped)")
    p.add_argument("--jobs", type=int, default=1000, help="jobs (a claim/finish batch has one run of each)")
    p.add_argument("--rounds", type=int, default=20, help="claim/finish rounds per measurement")
    p.add_argument("--requests", type=int, default=2000, help="GET /api/jobs/{id}/runs requests per measurement")
    p.add_argument("--keep", action="store_true", help="keep the scratch database")
    return p


async def _partitions(dsn: str, days: int, epoch: int) -> None:
    """One empty partition per day from `days` ago through retention's days ahead."""
    pool = await connect(dsn, max_size=2)
    store = PartitionStore(pool)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    for part in await store.list():
        if part.lower is None and not part.is_default:  # the migration's "everything before" partition
            assert await store.drop(epoch, part.name) is Change.DONE
    have = {p.name for p in await store.list()}
    for n in range(-days, retention.AHEAD_DAYS + 1):
        lower = today + n * DAY
        if retention.day_name(lower) not in have:
            outcome, _moved = await store.create(epoch, retention.day_name(lower), lower, lower + DAY)
            assert outcome is Change.DONE
    await pool.close()


async def _load(dsn: str, history: int, days: int, first_job: int, jobs: int) -> None:
    """Replace each past day's empty partition by one holding its share of `history` runs."""
    conn = await asyncpg.connect(dsn)
    try:
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        per_day = history // days
        first_id = int(await conn.fetchval("SELECT max(id) FROM runs") or 0) + 1
        for n in range(-days, 0):
            lower = today + n * DAY
            name = retention.day_name(lower)
            started = time.monotonic()
            async with conn.transaction():
                await conn.execute(f'DROP TABLE "{name}"')
                await conn.execute(f'CREATE TABLE "{name}" (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)')
                await conn.execute(LOAD_DAY.format(name=name), first_id, per_day, jobs, lower, first_job)
                await conn.execute(
                    f"ALTER TABLE runs ATTACH PARTITION \"{name}\" FOR VALUES FROM ('{lower.isoformat()}')"
                    f" TO ('{(lower + DAY).isoformat()}')"
                )
            first_id += per_day
            say(f"loaded {name}: {per_day:,} runs in {time.monotonic() - started:.1f} s")
        await conn.execute(f"SELECT setval('runs_id_seq', {first_id})")
        started = time.monotonic()
        await conn.execute("VACUUM ANALYZE runs")  # history as autovacuum would have left it
        say(f"vacuum analyze: {time.monotonic() - started:.1f} s")
    finally:
        await conn.close()


async def _claims(pool: asyncpg.Pool, job_ids: list[int], rounds: int) -> dict[str, list[float]]:
    """Per round: claim one queued run of every job in one batch, then finish them in one batch."""
    store = RunStore(pool)
    node = f"bench-{uuid.uuid4().hex[:6]}"
    out: dict[str, list[float]] = {"claim": [], "finish": []}
    for _ in range(rounds):
        rows = await pool.fetch(
            "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at, exclusive, pushed_epoch)"
            " SELECT j, clock_timestamp(), 'schedule', 'queued', now(), true, 1 FROM unnest($1::bigint[]) j"
            " RETURNING id",
            job_ids,
        )
        ids = [r["id"] for r in rows]
        started = time.perf_counter()
        claimed = await store.claim(ids, node, 30.0)
        claim_s = time.perf_counter() - started
        assert all(not isinstance(c, str) for c in claimed), "a run was refused"
        started = time.perf_counter()
        done = await store.finish([Outcome(run_id=i, node_id=node, state="completed", duration_ms=1.0) for i in ids])
        finish_s = time.perf_counter() - started
        assert len(done.written) == len(ids)
        out["claim"].append(len(ids) / claim_s)
        out["finish"].append(len(ids) / finish_s)
    return out


async def _api_latency(base_url: str, job_ids: list[int], requests: int) -> list[float]:
    async with aiohttp.ClientSession() as session:

        async def one() -> float:
            started = time.perf_counter()
            async with session.get(f"{base_url}/api/jobs/{random.choice(job_ids)}/runs") as resp:
                assert resp.status == 200, await resp.text()
                await resp.read()
            return (time.perf_counter() - started) * 1000

        for _ in range(min(200, requests)):  # warm-up: connections, prepared statements
            await one()
        return [await one() for _ in range(requests)]


def _start_api(dsn: str, redis_url: str, port: int) -> subprocess.Popen[bytes]:
    env = {
        **clean_environ(),
        "PYTHONPATH": os.pathsep.join(filter(None, [package_root(), os.environ.get("PYTHONPATH")])),
        "DATABASE_URL": dsn,
        "REDIS_URL": redis_url,
        "PORT": str(port),
        "CRONOS_API_HOST": "127.0.0.1",
        "CRONOS_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(cronos_argv("api"), env=env, stdout=subprocess.DEVNULL)


async def _wait_serving(base_url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"{base_url}/health") as resp:
                    await resp.read()
                    return
            except aiohttp.ClientError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def _measure(dsn: str, base_url: str, job_ids: list[int], args: argparse.Namespace) -> dict[str, float]:
    pool = await connect(dsn, max_size=4)
    try:
        claims = await _claims(pool, job_ids, args.rounds)
    finally:
        await pool.close()
    latency = await _api_latency(base_url, job_ids, args.requests)
    return {
        "claim runs/s (median)": statistics.median(claims["claim"]),
        "finish runs/s (median)": statistics.median(claims["finish"]),
        "GET /api/jobs/{id}/runs p50 ms": pct(latency, 0.50),
        "GET /api/jobs/{id}/runs p99 ms": pct(latency, 0.99),
    }


async def _size(dsn: str) -> tuple[int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(RUNS_SIZE)), int(await conn.fetchval("SELECT count(*) FROM runs"))
    finally:
        await conn.close()


async def main(args: argparse.Namespace) -> int:
    settings = load_settings()
    scratch = Scratch.new(settings.database_url)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    say(f"bench history: {args.history:,} runs over {args.days} days, {args.jobs} jobs, database {scratch.db_name}")
    async with scratch_database(scratch, keep=args.keep) as dsn:
        pool = await connect(dsn, max_size=2)
        epoch = (await EpochStore(pool).take("bench-history")).epoch
        job_ids = [
            r["id"]
            for r in await pool.fetch(
                "INSERT INTO jobs (name, cron_expression, payload) SELECT 'bench-' || g, '* * * * * *',"
                ' \'{"action": "noop"}\' FROM generate_series(1, $1) g RETURNING id',
                args.jobs,
            )
        ]
        await pool.close()
        await _partitions(dsn, args.days, epoch)
        api = _start_api(dsn, settings.redis_url, port)
        try:
            await _wait_serving(base_url)
            say("measuring on the empty table")
            empty = await _measure(dsn, base_url, job_ids, args)
            await _load(dsn, args.history, args.days, min(job_ids), args.jobs)
            say("measuring with the history")
            loaded = await _measure(dsn, base_url, job_ids, args)
        finally:
            stop_processes([api])
        size_before, rows_before = await _size(dsn)
        pool = await connect(dsn, max_size=2)
        started = time.monotonic()
        todo = await retention.once(PartitionStore(pool), epoch, datetime.now(UTC), RETENTION_S)
        pass_s = time.monotonic() - started
        await pool.close()
        size_after, rows_after = await _size(dsn)

    rows: list[list[Any]] = []
    ok = True
    for name, before in empty.items():
        after = loaded[name]
        ratio = after / before
        worse = ratio < 1 - TARGET if "runs/s" in name else ratio > 1 + TARGET
        ok &= not worse
        rows.append([name, f"{before:,.1f}", f"{after:,.1f}", f"{ratio:.2f}", "MISSED" if worse else "ok"])
    print()
    print(table(["", "empty", f"{args.history / 1e6:g}M runs", "ratio", f"within {TARGET:.0%}"], rows))
    print(
        f"\nruns on disk: {size_before / 2**30:.2f} GiB ({rows_before:,} runs) before a retention pass of"
        f" {RETENTION_S / 86_400:g} days, {size_after / 2**30:.2f} GiB ({rows_after:,} runs) after:"
        f" {len(todo.drop)} day partitions dropped in {pass_s:.2f} s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(_parser().parse_args())))
