"""`cronos bench run`: noop runs end to end (ledger -> stream -> executors -> ledger).

    cronos bench run --runs 20000 --executors 1,2,4        # throughput, one batch of N runs
    cronos bench run --rate 1000 --duration 10 --executors 2   # steady: R jobs firing every second
    cronos bench run --rate 1000 --executors 2 --lead-ms 0     # steady, tokens pushed when due

Each round gets its own database (created on settings.database_url's server, dropped
after) and key prefix, inserts the queued runs directly (as the leader would), publishes
their tokens and starts K `cronos executor` OS processes. In steady mode each second's
tokens go out `--lead-ms` before they are due, carrying their due time, as the leader
pushes them (CRONOS_PUSH_LEAD_MS). It prints completed runs/s,
start delay (started_at - scheduled_for) p50/p99, duplicates (ledger identity and a
per-run execution counter, both must be 0) and PostgreSQL transactions per run
(pg_stat_database commits + rollbacks: every statement the executors send is one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from cronos import lifecycle
from cronos.bench.common import (
    Scratch,
    clean_environ,
    cronos_argv,
    database_name,
    delete_keys,
    every_second_jobs,
    package_root,
    scratch_database,
    stop_processes,
)
from cronos.bench.counter import executions_key
from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.redis_client import connect as connect_redis
from cronos.settings import Settings
from cronos.store.db import connect
from cronos.stream import RunStream


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronos bench run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=20_000, help="runs per round (throughput mode)")
    p.add_argument("--executors", default="1,2,4", help="comma-separated executor process counts, one round each")
    p.add_argument("--concurrency", type=int, default=1000, help="CRONOS_EXECUTOR_CONCURRENCY of each executor")
    p.add_argument("--rate", type=int, default=0, help="steady mode: jobs firing every second")
    p.add_argument("--duration", type=int, default=10, help="steady mode: seconds")
    p.add_argument(
        "--lead-ms", type=int, default=None, help="steady mode: push lead (default: CRONOS_PUSH_LEAD_MS, 250)"
    )
    return p


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.lead_ms is None:
        args.lead_ms = settings.push_lead_ms
    counts = [int(k) for k in args.executors.split(",") if k.strip()]
    mode = f"steady {args.rate} runs/s for {args.duration} s" if args.rate else f"{args.runs} runs"
    if args.rate:
        mode += f", tokens pushed {args.lead_ms} ms ahead"
    print(f"cronos bench run: {mode}, executor concurrency {args.concurrency}, fsync on, synchronous_commit on")
    print(
        f"{'executors':>9} {'runs':>7} {'runs/s':>8} {'delay p50':>10} {'delay p99':>10} {'delay max':>10} "
        f"{'dup':>4} {'pg tx/run':>9}"
    )
    for k in counts:
        row = asyncio.run(_round(settings, args, k))
        print(
            f"{k:>9} {row['runs']:>7} {row['rate']:>8.0f} {row['p50']:>8.1f}ms {row['p99']:>8.1f}ms "
            f"{row['max']:>8.1f}ms {row['dup']:>4} {row['tx']:>9.3f}",
            flush=True,
        )
        if args.rate:
            ticks = row["p99_by_tick"]
            steady = sorted(ticks[1:])[len(ticks[1:]) // 2] if len(ticks) > 1 else 0.0
            print(
                f"{'':>9} p99 per tick (ms): {' '.join(f'{t:.0f}' for t in ticks)};"
                f" median after the first: {steady:.0f}"
            )
        if row["dup"] or row["missing"] or row["early"]:
            print(
                f"  !! duplicates {row['dup']}, not completed {row['missing']}, started before due {row['early']}",
                flush=True,
            )
            return 1
    return 0


async def _round(settings: Settings, args: argparse.Namespace, executors: int) -> dict[str, Any]:
    scratch = Scratch.new(settings.database_url)
    # The executors' working directory: no ./.env there, they read only what _start sets.
    with tempfile.TemporaryDirectory(prefix="cronos-bench-") as cwd:
        async with scratch_database(scratch) as dsn:
            return await _measure(settings, args, executors, scratch, dsn, cwd)


async def _measure(
    settings: Settings, args: argparse.Namespace, executors: int, scratch: Scratch, dsn: str, cwd: str
) -> dict[str, Any]:
    pool = await connect(dsn, min_size=1, max_size=4)
    client = connect_redis(settings.redis_url)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        stream = RunStream(client, Keys(scratch.prefix))
        await stream.ensure_group()
        n_jobs = args.rate or args.runs
        job_ids = await every_second_jobs(pool, n_jobs, "bench-")
        procs = _start(settings, dsn, scratch.prefix, executors, args.concurrency, args.lead_ms, cwd)
        await _wait_ready(client, Keys(scratch.prefix), executors, procs)
        tx_before = await _transactions(pool, dsn)
        started = time.monotonic()
        if args.rate:
            total = await _steady(pool, stream, job_ids, args.duration, args.lead_ms)
        else:
            total = args.runs
            now = datetime.now(UTC)
            await stream.publish(await _insert(pool, job_ids, now))
        await _wait_done(pool, total, timeout=max(60.0, total / 500))
        wall = time.monotonic() - started
        stop_processes(procs)
        await asyncio.sleep(0.6)  # let the backends' statistics reach pg_stat_database
        tx = await _transactions(pool, dsn) - tx_before
        return {**await _ledger_figures(pool, client, scratch.prefix, total, wall), "tx": tx / max(total, 1)}
    finally:
        stop_processes(procs, timeout_s=0)
        await pool.close()
        await delete_keys(client, scratch.prefix)
        await client.aclose()


def _start(
    settings: Settings, dsn: str, prefix: str, k: int, concurrency: int, lead_ms: int, cwd: str
) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(k):
        env = {
            **clean_environ(),
            "DATABASE_URL": dsn,
            "REDIS_URL": settings.redis_url,
            "CRONOS_KEY_PREFIX": prefix,
            "CRONOS_NODE_ID": f"bench-{i}",
            "CRONOS_EXECUTOR_CONCURRENCY": str(concurrency),
            "CRONOS_PUSH_LEAD_MS": str(lead_ms),
            "CRONOS_LOG_LEVEL": "WARNING",
            "CRONOS_LOG_FORMAT": "json",
            "PYTHONPATH": os.pathsep.join(filter(None, [package_root(), os.environ.get("PYTHONPATH")])),
        }
        argv = cronos_argv("executor", "--import", "cronos.bench.counter")
        procs.append(subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL))
    return procs


async def _wait_ready(client: Any, keys: Keys, k: int, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 30
    while len([key async for key in client.scan_iter(match=keys.node_pattern)]) < k:
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError("executors did not start (see their output above)")
        await asyncio.sleep(0.05)


async def _insert(pool: asyncpg.Pool, job_ids: list[int], scheduled_for: datetime) -> list[RunToken]:
    rows = await pool.fetch(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, exclusive, expires_at)"
        " SELECT j, $2, 1, 'schedule', 'queued', $2, true, $3 FROM unnest($1::bigint[]) j RETURNING id, job_id",
        job_ids,
        scheduled_for,
        lifecycle.expiry(scheduled_for, 60),  # the jobs' grace: the column's default
    )
    ms = int(scheduled_for.timestamp() * 1000)
    return [RunToken(run_id=r["id"], job_id=r["job_id"], scheduled_for_ms=ms) for r in rows]


async def _steady(pool: asyncpg.Pool, stream: RunStream, job_ids: list[int], duration: int, lead_ms: int) -> int:
    """Every job fires at each whole second. The ledger rows are written up front, so this
    process's inserts do not compete with the executors for the CPU at the instants measured;
    each second's tokens are pushed `lead_ms` before the second, with their due time, as the
    leader does."""
    first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    ticks = [first + timedelta(seconds=s) for s in range(duration)]
    batches = [await _insert(pool, job_ids, tick) for tick in ticks]
    lead = timedelta(milliseconds=lead_ms)
    for tick, tokens in zip(ticks, batches, strict=True):
        await asyncio.sleep(max(0.0, (tick - lead - datetime.now(UTC)).total_seconds()))
        due_ms = int(tick.timestamp() * 1000)
        await stream.publish([msgspec.structs.replace(t, due_ms=due_ms) for t in tokens])
    return len(job_ids) * duration


async def _wait_done(pool: asyncpg.Pool, total: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while await pool.fetchval("SELECT count(*) FROM runs WHERE state <> 'queued' AND state <> 'running'") < total:
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(0.05)


async def _ledger_figures(pool: asyncpg.Pool, client: Any, prefix: str, total: int, wall: float) -> dict[str, Any]:
    row = await pool.fetchrow(
        "SELECT count(*) FILTER (WHERE state = 'completed') AS done,"
        " extract(epoch FROM max(finished_at) - min(scheduled_for)) AS span,"
        " percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_for)) AS p50,"
        " percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_for)) AS p99,"
        " max(extract(epoch FROM started_at - scheduled_for)) AS max,"
        " count(*) FILTER (WHERE started_at < due_at) AS early FROM runs"
    )
    identity_dups = await pool.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM runs GROUP BY job_id, scheduled_for, attempt HAVING count(*) > 1) d"
    )
    per_second = await pool.fetch(
        "SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_for)) AS p99"
        " FROM runs GROUP BY scheduled_for ORDER BY scheduled_for"
    )
    executions = await client.hgetall(executions_key(prefix))
    extra_runs = sum(int(v) - 1 for v in executions.values())
    span = float(row["span"] or wall)
    return {
        "runs": int(row["done"]),
        "rate": int(row["done"]) / span if span > 0 else 0.0,
        "p50": float(row["p50"] or 0) * 1000,
        "p99": float(row["p99"] or 0) * 1000,
        "max": float(row["max"] or 0) * 1000,
        "dup": int(identity_dups) + extra_runs + max(0, len(executions) - total),
        "missing": total - int(row["done"]) + max(0, total - len(executions)),
        "early": int(row["early"]),
        "p99_by_tick": [float(r["p99"] or 0) * 1000 for r in per_second],
    }


async def _transactions(pool: asyncpg.Pool, dsn: str) -> int:
    name = database_name(dsn)
    async with pool.acquire() as conn:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        value = await conn.fetchval("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", name)
    return int(value)
