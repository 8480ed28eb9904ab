"""`cronos bench dispatch`: the leader's throughput, lag, memory and idle cost, on real services.

Runs in a database and key prefix of its own (dropped after). The leader is a real
`cronos dispatcher` subprocess, so its peak RSS and CPU are its own. Phases:

1. election -> first push: N jobs registered plus one queued manual run; the time from
   the epoch's elected_at to that run's stream entry (includes loading N jobs).
2. burst: all N jobs due at the same instant T; ticks/s = N / (last push - T).
3. steady: 1,000 jobs every second (jitter spreads them over the second): dispatch lag =
   stream entry time - due time (scheduled_for + the job's deterministic jitter).
4. idle: N registered, 10 due per second: the leader's CPU %.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import redis.asyncio as aioredis

from cronos import lifecycle
from cronos.bench.common import Scratch, cronos_argv, delete_keys, drop_database, pct, proc_cpu_s, proc_peak_rss
from cronos.keys import Keys
from cronos.lifecycle import jitter_s
from cronos.messages import TOKEN_FIELD, decode_token
from cronos.settings import Settings
from cronos.store.db import migrate


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronos bench dispatch", description="the leader's throughput, lag, memory, idle cost"
    )
    p.add_argument("--jobs", type=int, default=10_000, help="registered jobs, all due at once in the burst")
    p.add_argument("--schedules", type=int, default=1000, help="distinct (expression, tz) among them (<= 1000)")
    p.add_argument("--steady-jobs", type=int, default=1000, help="every-second jobs in the steady phase")
    p.add_argument("--steady-s", type=float, default=10.0, help="length of the steady phase")
    p.add_argument("--steady-jitter-s", type=float, default=1.0, help="jitter of the steady jobs (0: all aligned)")
    p.add_argument("--idle-due", type=int, default=10, help="jobs due every second in the idle phase")
    p.add_argument("--idle-s", type=float, default=35.0, help="length of the idle phase (>= one 30 s resync)")
    return p


def _burst_expressions(at: datetime, count: int) -> list[str]:
    """`count` distinct 6-field expressions that all fire at `at` (UTC) and not again soon."""
    found: list[str] = []
    for month in [at.month] + [m for m in range(1, 13) if m != at.month]:
        for hour in [h for h in range(24) if h != at.hour]:
            for day in [d for d in range(1, 29) if d != at.day]:
                found.append(f"{at.second} {at.minute} {at.hour},{hour} {at.day},{day} {at.month},{month} *")
                if len(found) == count:
                    return found
    return found


def _entry_ms(entry_id: bytes) -> float:
    return float(entry_id.split(b"-")[0])


class Bench:
    def __init__(self, settings: Settings, args: argparse.Namespace) -> None:
        self.args = args
        self.settings = settings
        self.scratch = Scratch.new(settings.database_url)
        self.dsn = self.scratch.dsn
        self.keys = Keys(self.scratch.prefix)
        self.results: list[tuple[str, str, str]] = []
        self.leader: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.gettempdir()) / f"cronos-bench-{self.scratch.tag}.log"
        self.redis: Any = None
        self.last_id = "0-0"

    def say(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def result(self, name: str, value: str, target: str) -> None:
        self.results.append((name, value, target))
        self.say(f"RESULT {name}: {value}   (target {target})")

    async def run(self) -> None:
        await migrate(self.dsn)
        self.redis = aioredis.from_url(self.settings.redis_url)
        pool = await asyncpg.create_pool(self.dsn, min_size=1, max_size=4)
        try:
            await self._phases(pool)
        finally:
            await pool.close()
            await self._cleanup()

    async def _phases(self, pool: asyncpg.Pool) -> None:
        n = self.args.jobs
        now = datetime.now(UTC).replace(microsecond=0)
        burst_at = now + timedelta(seconds=8 + n // 15_000)
        exprs = _burst_expressions(burst_at, min(self.args.schedules, 1000))
        self.say(f"registering {n:,} jobs over {len(exprs)} schedules, all due at {burst_at:%H:%M:%S}")
        started = time.monotonic()
        await pool.copy_records_to_table(
            "jobs",
            records=[(f"burst-{i}", exprs[i % len(exprs)], now) for i in range(n)],
            columns=["name", "cron_expression", "last_scheduled_for"],
        )
        manual_job = await pool.fetchval(
            "INSERT INTO jobs (name, cron_expression, status) VALUES ('manual', '0 0 1 1 *', 'paused') RETURNING id"
        )
        await pool.execute(
            "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at, expires_at)"
            " VALUES ($1, now(), 'manual', 'queued', now(), now() + $2::interval)",
            manual_job,
            lifecycle.grace(60),  # the job's grace: the column's default
        )
        self.say(f"registered in {time.monotonic() - started:.1f}s; starting the leader (log: {self.log_path})")
        self._start_leader()
        assert self.leader is not None

        first = await self._wait_entries(1, timeout=30)
        elected = await pool.fetchval("SELECT elected_at FROM leader_epoch")
        took = first[0][0] - elected.timestamp() * 1000
        self.result("election -> first push", f"{took:.0f} ms (with {n:,} jobs to load)", "<= 2000 ms")

        self.say(f"waiting for the burst at {burst_at:%H:%M:%S} ...")
        await self._wait_length(n + 1, timeout=(burst_at - datetime.now(UTC)).total_seconds() + 90)
        head = await self.redis.xrange(self.keys.stream, count=2)
        tail = await self.redis.xrevrange(self.keys.stream, count=1)
        first_push, last = _entry_ms(head[-1][0]), _entry_ms(tail[0][0])
        self.last_id = tail[0][0].decode()
        burst_ms = burst_at.timestamp() * 1000
        entries = range(await self.redis.xlen(self.keys.stream) - 1)
        queued, first_write, last_write = await pool.fetchrow(
            "SELECT count(*), min(created_at), max(created_at) FROM runs WHERE trigger = 'schedule'"
        )
        # The leader writes ticks ahead of their due time, so the ledger rate is
        # measured over the inserts (first to last batch's transaction start) on its own.
        insert_s = max((last_write - first_write).total_seconds(), 1e-3)
        # Ticks are written ahead and pushed a lead before they are due. The rate is over
        # the busy time, first ledger write -> last push, less the deliberate wait (if any) between
        # the last write and the first push; writes and pushes overlap in a big burst.
        first_ms, last_write_ms = first_write.timestamp() * 1000, last_write.timestamp() * 1000
        busy_s = max((last - first_ms) - max(0.0, first_push - last_write_ms), 1.0) / 1000
        self.result(
            "burst: ticks queued + pushed",
            f"{len(entries) / busy_s:,.0f}/s ({len(entries):,} tokens, {queued:,} runs in {busy_s * 1000:,.0f} ms"
            f" busy; last push {last - burst_ms:+.0f} ms from the due instant)",
            ">= 20,000/s",
        )
        self.result(
            "burst: ledger inserts",
            f"{queued / insert_s:,.0f}/s ({queued:,} rows, first -> last batch {insert_s * 1000:.0f} ms)",
            ">= 20,000/s",
        )

        await self._steady(pool)
        await self._idle(pool)
        peak = proc_peak_rss(self.leader.pid) or 0
        self.result("leader peak RSS", f"{peak / 2**20:.0f} MB ({n:,} jobs registered)", "<= 250 MB")

    async def _steady(self, pool: asyncpg.Pool) -> None:
        count, jitter = self.args.steady_jobs, self.args.steady_jitter_s
        ids = await self._add_jobs(pool, "steady", count, "* * * * * *", jitter)
        self.say(f"steady: {count} jobs every second (jitter {jitter}s) for {self.args.steady_s:.0f}s")
        await asyncio.sleep(2.0)  # let the leader pick them up
        await self._drain()
        lags: list[float] = []
        deadline = time.monotonic() + self.args.steady_s
        while time.monotonic() < deadline:
            for push_ms, token in await self._read(block_ms=200):
                if token.job_id in ids:
                    due = token.scheduled_for_ms + jitter_s(token.job_id, token.scheduled_for_ms, jitter) * 1000
                    # The leader pushes `push_lead_ms` ahead on purpose: lag is late against that instant.
                    lags.append(push_ms - (due - self.settings.push_lead_ms))
        if not lags:
            self.result("steady dispatch lag", "no tokens seen", "p99 <= 20 ms, max <= 100 ms")
            return
        self.result(
            f"steady dispatch lag at {len(lags) / self.args.steady_s:,.0f} ticks/s",
            f"p50 {pct(lags, 0.5):.1f} ms, p99 {pct(lags, 0.99):.1f} ms, max {max(lags):.1f} ms ({len(lags):,} tokens)",
            "p99 <= 20 ms, max <= 100 ms",
        )
        keep = sorted(ids)[: self.args.idle_due]
        await pool.execute(
            "UPDATE jobs SET status = 'paused' WHERE name LIKE 'steady-%' AND NOT (id = ANY($1::bigint[]))", keep
        )
        for job_id in sorted(ids):
            await pool.execute("SELECT pg_notify('cronos_jobs', $1)", f'{{"op": "paused", "job_id": {job_id}}}')

    async def _idle(self, pool: asyncpg.Pool) -> None:
        assert self.leader is not None
        total = await pool.fetchval("SELECT count(*) FROM jobs")
        self.say(f"idle: {total:,} registered, {self.args.idle_due} due per second, for {self.args.idle_s:.0f}s")
        await asyncio.sleep(2.0)
        cpu0, t0 = self._leader_cpu(), time.monotonic()
        while time.monotonic() - t0 < self.args.idle_s:
            await asyncio.sleep(min(5.0, self.args.idle_s))
            await self._drain()
            cpu = self._leader_cpu()
            self.say(f"  leader CPU so far {100 * (cpu - cpu0) / (time.monotonic() - t0):.1f}%")
        cpu1, t1 = self._leader_cpu(), time.monotonic()
        self.result(
            "leader CPU, idle",
            f"{100 * (cpu1 - cpu0) / (t1 - t0):.1f}% ({total:,} registered, {self.args.idle_due} due/s)",
            "< 5 %",
        )

    async def _add_jobs(self, pool: asyncpg.Pool, prefix: str, count: int, expr: str, jitter: float) -> set[int]:
        now = datetime.now(UTC)
        rows = await pool.fetch(
            "INSERT INTO jobs (name, cron_expression, jitter_s, misfire_policy, last_scheduled_for)"
            " SELECT $1 || '-' || g, $2, $3, 'run_all', $4 FROM generate_series(1, $5) g RETURNING id",
            prefix,
            expr,
            jitter,
            now,
            count,
        )
        ids = {r["id"] for r in rows}
        for job_id in sorted(ids):
            await pool.execute("SELECT pg_notify('cronos_jobs', $1)", f'{{"op": "created", "job_id": {job_id}}}')
        return ids

    def _leader_cpu(self) -> float:
        assert self.leader is not None
        return proc_cpu_s(self.leader.pid) or 0.0

    def _start_leader(self) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": self.dsn,
            "REDIS_URL": self.settings.redis_url,
            "CRONOS_KEY_PREFIX": self.keys.prefix,
            "CRONOS_NODE_ID": "bench-leader",
            "CRONOS_PUSH_LEAD_MS": str(self.settings.push_lead_ms),
            "CRONOS_LOG_FORMAT": "json",
            "CRONOS_METRICS_PORT": "0",
        }
        with self.log_path.open("wb") as out:
            self.leader = subprocess.Popen(cronos_argv("dispatcher"), env=env, stdout=out, stderr=subprocess.STDOUT)

    async def _read(self, block_ms: int) -> list[tuple[float, Any]]:
        reply = await self.redis.xread({self.keys.stream: self.last_id}, count=20_000, block=block_ms)
        found = []
        for _key, entries in reply or []:
            for entry_id, fields in entries:
                self.last_id = entry_id.decode()
                found.append((float(self.last_id.split("-")[0]), decode_token(fields[TOKEN_FIELD])))
        return found

    async def _drain(self) -> None:
        while await self._read(block_ms=1):
            pass

    async def _wait_entries(self, count: int, timeout: float, progress: bool = False) -> list[tuple[float, Any]]:
        found: list[tuple[float, Any]] = []
        deadline, shown = time.monotonic() + timeout, time.monotonic()
        while len(found) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"saw {len(found)} of {count} tokens; leader log: {self.log_path}")
            if self.leader is not None and self.leader.poll() is not None:
                raise RuntimeError(f"the leader exited ({self.leader.returncode}); log: {self.log_path}")
            found.extend(await self._read(block_ms=500))
            if progress and found and time.monotonic() - shown > 0.5:
                shown = time.monotonic()
                self.say(f"  {len(found):,}/{count:,} tokens pushed")
        return found

    async def _wait_length(self, count: int, timeout: float) -> None:
        """Wait for `count` stream entries, polling XLEN only (cheap: the leader gets the CPU)."""
        deadline, length = time.monotonic() + timeout, 0
        while length < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"saw {length} of {count} tokens; leader log: {self.log_path}")
            if self.leader is not None and self.leader.poll() is not None:
                raise RuntimeError(f"the leader exited ({self.leader.returncode}); log: {self.log_path}")
            await asyncio.sleep(0.5)
            length = int(await self.redis.xlen(self.keys.stream))
            if length > 1:
                self.say(f"  {length - 1:,}/{count - 1:,} tokens pushed")

    async def _cleanup(self) -> None:
        if self.leader is not None and self.leader.poll() is None:
            self.leader.terminate()
            try:
                self.leader.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.leader.kill()
        if self.redis is not None:
            await delete_keys(self.redis, self.keys.prefix)
            await self.redis.aclose()
        await drop_database(self.scratch.server_dsn, self.scratch.db_name)


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    bench = Bench(settings, args)
    try:
        asyncio.run(bench.run())
    except (TimeoutError, RuntimeError) as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    print("\ncronos bench dispatch --jobs", args.jobs)
    width = max(len(name) for name, _v, _t in bench.results) if bench.results else 10
    for name, value, target in bench.results:
        print(f"  {name:<{width}}  {value}   [target {target}]")
    print(msgspec.json.encode([{"name": n, "value": v, "target": t} for n, v, t in bench.results]).decode())
    return 0
