"""Bounded history (issue 13, item 3): does a runs table holding millions of old runs slow the
hot path, and what does a retention pass give back?

On a scratch database (created on DATABASE_URL's server, dropped after) with one runs
partition per UTC day from --days ago through three days ahead and --jobs jobs, it measures
twice, first with no history, then after loading --history finished runs spread over those
days (each day built apart with generate_series and attached, as a bulk load would be):

* claim and finish throughput: rounds of one queued run per job, claimed in one batch and
  finished in one batch through RunStore, as executors do (median runs/s over the rounds);
* `GET /api/jobs/{id}/runs` latency from a `cronos api` process (p50/p99 over --requests
  requests on random jobs, after a warm-up): with history a job's first page fills from its
  last day's partition; on the empty side a job has fewer runs than a page (those of the
  rounds), so the store walks all its windows back to the oldest day (see RUN_LIST_OF_JOB);

then the size of runs on disk before and after one retention pass (dispatcher.retention)
at CRONOS_RUNS_RETENTION's default of 30 days. The target: every figure within 20 % of the
empty table's.

    .venv/bin/python scripts/bench_history.py                       # 10 million runs, 40 days
    .venv/bin/python scripts/bench_history.py --history 1000000 --rounds 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from cronos.store.runs import ClaimedRun, Outcome, RunStore
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


class Side:
    """One of the two databases measured: its pool, API and figures."""

    def __init__(self, name: str, dsn: str, job_ids: list[int], epoch: int) -> None:
        self.name, self.dsn, self.job_ids, self.epoch = name, dsn, job_ids, epoch
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.claim: list[float] = []  # runs/s per round
        self.finish: list[float] = []
        self.latency_ms: list[float] = []

    def figures(self) -> dict[str, float]:
        return {
            "claim runs/s (median)": statistics.median(self.claim),
            "finish runs/s (median)": statistics.median(self.finish),
            "GET /api/jobs/{id}/runs p50 ms": pct(self.latency_ms, 0.50),
            "GET /api/jobs/{id}/runs p99 ms": pct(self.latency_ms, 0.99),
        }


async def _claim_round(side: Side, pool: asyncpg.Pool) -> None:
    """Claim one queued run of every job in one batch, then finish them in one batch, as an
    executor does with a burst of ticks (its tokens' ticks known, as they are)."""
    node, store = f"bench-{uuid.uuid4().hex[:6]}", RunStore(pool)
    rows = await pool.fetch(  # the bench writes the runs, as the leader would
        "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at, exclusive, pushed_epoch)"
        " SELECT j, date_trunc('milliseconds', clock_timestamp()), 'schedule', 'queued', now(), true, 1"
        " FROM unnest($1::bigint[]) j RETURNING id, floor(extract(epoch FROM scheduled_for) * 1000)::bigint AS ms",
        side.job_ids,
    )
    ids = [r["id"] for r in rows]
    started = time.perf_counter()
    claimed = [c for c in await store.claim(ids, node, 30.0, [r["ms"] for r in rows]) if isinstance(c, ClaimedRun)]
    side.claim.append(len(ids) / (time.perf_counter() - started))
    assert len(claimed) == len(ids), "a run was refused"
    outcomes = [
        Outcome(run_id=c.id, node_id=node, state="completed", duration_ms=1.0, scheduled_for=c.scheduled_for)
        for c in claimed
    ]
    started = time.perf_counter()
    done = await store.finish(outcomes)
    side.finish.append(len(ids) / (time.perf_counter() - started))
    assert len(done.written) == len(ids)


async def _get_runs(side: Side, session: aiohttp.ClientSession, requests: int, *, keep: bool = True) -> None:
    for _ in range(requests):
        started = time.perf_counter()
        async with session.get(f"{side.base_url}/api/jobs/{random.choice(side.job_ids)}/runs") as resp:
            assert resp.status == 200, await resp.text()
            await resp.read()
        if keep:
            side.latency_ms.append((time.perf_counter() - started) * 1000)


async def _measure(sides: list[Side], rounds: int, requests: int) -> None:
    """Round by round, each side in turn (the order alternating): whatever else loads the machine
    meanwhile weighs on both alike."""
    pools = [await connect(side.dsn, max_size=4) for side in sides]
    try:
        async with aiohttp.ClientSession() as session:
            for side in sides:
                await _get_runs(side, session, 200, keep=False)  # warm-up: connections, prepared statements
                await _claim_round(side, pools[sides.index(side)])
                side.claim.clear()
                side.finish.clear()
            for n in range(rounds):
                order = list(zip(sides, pools, strict=True))
                for side, pool in order if n % 2 == 0 else reversed(order):
                    await _claim_round(side, pool)
                    await _get_runs(side, session, max(1, requests // rounds))
    finally:
        for pool in pools:
            await pool.close()


def _start_api(side: Side, redis_url: str) -> subprocess.Popen[bytes]:
    env = {
        **clean_environ(),
        "PYTHONPATH": os.pathsep.join(filter(None, [package_root(), os.environ.get("PYTHONPATH")])),
        "DATABASE_URL": side.dsn,
        "REDIS_URL": redis_url,
        "PORT": str(side.port),
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


async def _side(name: str, dsn: str, args: argparse.Namespace) -> Side:
    """Jobs and one empty partition per day on a migrated database."""
    pool = await connect(dsn, max_size=2)
    try:
        epoch = (await EpochStore(pool).take("bench-history")).epoch
        rows = await pool.fetch(
            "INSERT INTO jobs (name, cron_expression, payload) SELECT 'bench-' || g, '* * * * * *',"
            ' \'{"action": "noop"}\' FROM generate_series(1, $1) g RETURNING id',
            args.jobs,
        )
    finally:
        await pool.close()
    await _partitions(dsn, args.days, epoch)
    return Side(name, dsn, [r["id"] for r in rows], epoch)


async def _size(dsn: str) -> tuple[int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(RUNS_SIZE)), int(await conn.fetchval("SELECT count(*) FROM runs"))
    finally:
        await conn.close()


async def main(args: argparse.Namespace) -> int:
    settings = load_settings()
    empty_db, full_db = Scratch.new(settings.database_url), Scratch.new(settings.database_url)
    say(f"bench history: {args.history:,} runs over {args.days} days, {args.jobs} jobs")
    async with contextlib.AsyncExitStack() as stack:
        empty = await _side("empty", await stack.enter_async_context(scratch_database(empty_db, args.keep)), args)
        full = await _side("history", await stack.enter_async_context(scratch_database(full_db, args.keep)), args)
        await _load(full.dsn, args.history, args.days, min(full.job_ids), args.jobs)
        apis = [_start_api(side, settings.redis_url) for side in (empty, full)]
        try:
            for side in (empty, full):
                await _wait_serving(side.base_url)
            say(f"measuring {empty_db.db_name} (empty) and {full_db.db_name} (history), round by round")
            await _measure([empty, full], args.rounds, args.requests)
        finally:
            stop_processes(apis)
        size_before, rows_before = await _size(full.dsn)
        pool = await connect(full.dsn, max_size=2)
        started = time.monotonic()
        todo = await retention.once(PartitionStore(pool), full.epoch, datetime.now(UTC), RETENTION_S)
        pass_s = time.monotonic() - started
        await pool.close()
        size_after, rows_after = await _size(full.dsn)

    rows: list[list[Any]] = []
    ok = True
    before_figures, after_figures = empty.figures(), full.figures()
    for name, before in before_figures.items():
        after = after_figures[name]
        ratio = after / before
        worse = ratio < 1 - TARGET if "runs/s" in name else ratio > 1 + TARGET
        ok &= not worse
        rows.append([name, f"{before:,.1f}", f"{after:,.1f}", f"{ratio:.2f}", "MISSED" if worse else "ok"])
    print()
    print(f"{args.rounds} claim/finish rounds of {args.jobs} runs and {args.requests} requests per side")
    print(table(["", "empty", f"{args.history / 1e6:g}M runs", "ratio", f"within {TARGET:.0%}"], rows))
    print(
        f"\nruns on disk: {size_before / 2**30:.2f} GiB ({rows_before:,} runs) before a retention pass of"
        f" {RETENTION_S / 86_400:g} days, {size_after / 2**30:.2f} GiB ({rows_after:,} runs) after:"
        f" {len(todo.drop)} day partitions dropped in {pass_s:.2f} s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(_parser().parse_args())))
