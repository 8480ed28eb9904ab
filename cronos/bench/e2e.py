"""`cronos bench e2e`: the whole system at its defaults, jobs registered through the REST API.

    cronos bench e2e --jobs 1000 --duration 60 --executors 2
    cronos bench e2e --jobs 200 --duration 30 --executors 2 --task cpu:4ms
    cronos bench e2e --jobs 1000 --duration 60 --autovacuum off
    cronos bench e2e --jobs 1000 --env CRONOS_EXECUTOR_CONCURRENCY=64 --env CRONOS_LOG_LEVEL=WARNING
    cronos bench e2e --jobs 500 --duration 20 --noisy 5

Starts `cronos api`, one `cronos dispatcher` and K `cronos executor` processes with the default
settings (plus only what --env sets) on a fresh database and Redis key prefix, registers N jobs
firing every second (`POST /api/jobs`, paused, then resumed 1,000 at a time by `POST
/api/jobs/bulk`; action `bench.count`: a no-op that counts its executions in Redis; with --task
cpu:4ms it first burns 4 ms of CPU on the executor's loop), waits --warmup seconds, then
measures --duration seconds. The window is (warm-up end, warm-up end + duration]: every job's
whole-second ticks in it are expected. After the window it waits (up to --settle s) for those
ticks to finish, stops the roles and prints the start delay at the task p50/p99/max (the task's
first statement, by its own wall clock, minus the tick: the headline), the start delay at the
claim beside it (the ledger's started_at - scheduled_for, as the API, CLI, console and metrics
define it), executions / expected, missed and duplicate ticks (ledger and counter), runs/s,
each executor's share of the runs (the ledger's node_id), the CPU per run of all processes
together, CPU seconds in the window of each role, of the PostgreSQL backends connected to the
database (sampled every second, so a short-lived autovacuum worker may be missed) and of
redis-server (which may serve others too), each role's peak RSS and the final run state counts.
Exits 1 when a tick was missed or duplicated. The database, keys and role logs are removed
after unless --keep (role logs are kept when the benchmark fails).

With --noisy S, two jobs that write a lot of run output (cronos.bench.noisy: a task logging 1,000
lines, a shell job printing 10 MB) fire every S seconds beside the no-op jobs in a second window
of --duration seconds, and the two windows' figures are set side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from cronos.bench.common import Scratch, delete_keys, free_port, say, scratch_database
from cronos.bench.counter import executions_key, task_payload
from cronos.bench.noisy import NOISY_LINES, NOISY_RUNS, Phase, job_bodies, side_by_side, states_text
from cronos.bench.roles import Roles, Usage
from cronos.bench.window import Verdict, Window, judge, render
from cronos.errors import ConfigError
from cronos.redis_client import connect as connect_redis
from cronos.settings import VARIABLES, Settings, load_settings
from cronos.store.db import connect_one

# What the benchmark itself sets on every role: --env may not change it.
OWNED = ("DATABASE_URL", "REDIS_URL", "CRONOS_KEY_PREFIX", "CRONOS_NODE_ID", "PORT")
BULK_CHUNK = 1000  # jobs resumed by one POST /api/jobs/bulk (its limit)
# The progress line's queued and running runs, each counted through its partial index. What ran
# since the phase began is the task's own counter in Redis: a count over the runs of the window
# every 5 s took PostgreSQL 160 ms a line 30 s into a 10,000-job run, growing with the table.
PROGRESS = (
    "SELECT (SELECT count(*) FROM runs WHERE state = 'queued') AS queued,"
    " (SELECT count(*) FROM runs WHERE state = 'running') AS running"
)
# $1, $2: the window's bounds; runs of its ticks not finished yet, and all of them.
UNSETTLED = (
    "SELECT count(*) FILTER (WHERE state IN ('queued', 'waiting', 'running')) AS open, count(*) AS total"
    " FROM runs WHERE scheduled_for > $1 AND scheduled_for <= $2"
)


@dataclass(frozen=True, slots=True)
class Result:
    """What `cronos bench compare` sets beside APScheduler's figures."""

    verdict: Verdict
    window: Window
    cpu_s: dict[str, float | None]
    alone: Verdict | None = None  # with --noisy: the first window's, without the noisy jobs

    @property
    def failed(self) -> bool:
        return self.verdict.failed or (self.alone is not None and self.alone.failed)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronos bench e2e", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, default=100, help="jobs registered, each firing every second")
    p.add_argument("--duration", type=float, default=60.0, help="seconds measured, after the warm-up")
    p.add_argument("--executors", type=int, default=1, help="executor processes")
    p.add_argument(
        "--task", default="noop", help="the jobs' task: noop (default) or cpu:<N>ms, N ms of CPU per run (e.g. cpu:4ms)"
    )
    p.add_argument("--warmup", type=float, default=5.0, help="seconds between registration and the window")
    p.add_argument("--settle", type=float, default=30.0, help="longest wait for the window's ticks to finish")
    p.add_argument("--progress", type=float, default=5.0, help="seconds between progress lines")
    p.add_argument("--autovacuum", choices=["on", "off"], default="on", help="autovacuum of the benchmark's tables")
    p.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="set a variable on every role (repeatable)"
    )
    p.add_argument(
        "--noisy",
        type=int,
        default=0,
        metavar="S",
        help="then measure again with a task logging 1,000 lines and a shell job printing 10 MB every S seconds",
    )
    p.add_argument("--keep", action="store_true", help="keep the database, Redis keys and role logs")
    return p


def role_env(pairs: Sequence[str]) -> dict[str, str]:
    """--env pairs, Cronos variables checked as the roles will decode them (ConfigError names the bad one)."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env {pair!r}: expected KEY=VALUE")
        if key in OWNED:
            raise ConfigError(f"--env {key}: set by the benchmark itself")
        env[key] = value
    load_settings({k: v for k, v in env.items() if k in VARIABLES}, env_file=None)
    return env


class E2E:
    def __init__(self, settings: Settings, args: argparse.Namespace, env: dict[str, str]) -> None:
        self.settings = settings
        self.args = args
        self.env = env
        if args.noisy:  # the shell job: allowed on the API (registration) and the executors
            env = {**env, "CRONOS_ALLOW_SHELL": "1"}
        self.payload = task_payload(args.task)  # ValueError names a bad --task
        self.scratch = Scratch.new(settings.database_url)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"cronos-bench-e2e-{self.scratch.tag}-"))
        self.roles = Roles(self.workdir, self.scratch.dsn, settings.redis_url, self.scratch.prefix, free_port(), env)
        self.client: Any = connect_redis(settings.redis_url)
        self._counted_from = 0  # executions counted when the phase being watched began
        self._last_line: tuple[float, int] | None = None  # (postgres cpu s, executions counted) at the last line

    async def run(self) -> Result:
        ok = False
        try:
            async with scratch_database(self.scratch, keep=self.args.keep) as dsn:
                conn = await connect_one(dsn)
                try:
                    result = await self._run(conn)
                    ok = True
                    return result
                finally:
                    self.roles.stop(timeout_s=5)  # already stopped unless something failed
                    await conn.close()
        finally:
            if not self.args.keep:
                await delete_keys(self.client, self.scratch.prefix)
            await self.client.aclose()
            if ok and not self.args.keep:
                shutil.rmtree(self.workdir, ignore_errors=True)
            else:
                print(f"role logs kept in {self.workdir}", file=sys.stderr)

    async def _run(self, conn: asyncpg.Connection) -> Result:
        args = self.args
        if args.autovacuum == "off":
            # Tables with storage: a partitioned table (runs) takes no storage options, its partitions do.
            tables = "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'"
            for (table,) in await conn.fetch(tables):
                await conn.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')
        extra = " ".join(f"{k}={v}" for k, v in self.env.items()) or "none"
        # A table's autovacuum_enabled cannot turn on what the server has off: say which it is.
        autovacuum = args.autovacuum if await conn.fetchval("SHOW autovacuum") == "on" else "off (server)"
        say(
            f"starting api, dispatcher, {args.executors} executor(s) on {self.scratch.db_name}"
            f" (autovacuum {autovacuum}; settings: defaults, --env {extra}; logs {self.workdir})"
        )
        async with aiohttp.ClientSession() as http:
            self.roles.start(args.executors, imports=("cronos.bench.noisy",) if args.noisy else ())
            await self.roles.wait_ready(http, conn, self.client)
            say(f"ready; registering {args.jobs:,} jobs through POST /api/jobs")
            job_ids = await _register(http, self.roles.base_url, args.jobs, self.payload)
            bodies = job_bodies(args.noisy) if args.noisy else []
            noisy = [await _post(http, f"{self.roles.base_url}/api/jobs", body, 201) for body in bodies]
        usage = Usage(self.roles, conn, self.scratch.db_name, await _redis_pid(self.client))
        started = time.time()
        say(f"registered; warming up for {args.warmup:g} s")
        await self._watch(conn, usage, started, started + args.warmup)
        quiet: tuple[Window, dict[str, float | None]] | None = None
        if noisy:
            quiet = await self._measure(conn, usage, "measuring the no-op jobs alone")
            async with aiohttp.ClientSession() as http:
                for job_id in noisy:
                    await _post(http, f"{self.roles.base_url}/api/jobs/{job_id}/resume", None, 200)
        window, cpu_s = await self._measure(
            conn, usage, "measuring with the noisy jobs" if noisy else "measuring", settle=len(job_ids)
        )
        rss = usage.peak_rss()
        say("stopping the roles")
        self.roles.stop()
        nodes = self.roles.executor_node_ids
        verdict = await judge(conn, self.client, self.scratch.prefix, job_ids, window, nodes)
        head = (
            f"cronos bench e2e --jobs {args.jobs} --duration {args.duration:g} --executors {args.executors}"
            f" --task {args.task}" + (f" --noisy {args.noisy}" if noisy else "")
        )
        print(f"\n{head} (autovacuum {autovacuum}; --env {extra})")
        print(render(verdict, window, cpu_s, rss, len(usage.backends)), flush=True)
        if quiet is not None:
            alone = await judge(conn, self.client, self.scratch.prefix, job_ids, quiet[0], nodes)
            phases = [Phase("alone", alone, *quiet), Phase("beside the noisy jobs", verdict, window, cpu_s)]
            print("\n" + side_by_side(phases))
            runs = {r["state"]: int(r["n"]) for r in await conn.fetch(NOISY_RUNS, noisy)}
            lines = await conn.fetchval(NOISY_LINES, noisy)
            print(f"noisy runs: {states_text(runs)}; their output lines kept: {lines:,}", flush=True)
            return Result(verdict, window, cpu_s, alone)
        return Result(verdict, window, cpu_s)

    async def _measure(
        self, conn: asyncpg.Connection, usage: Usage, what: str, settle: int = 0
    ) -> tuple[Window, dict[str, float | None]]:
        """One window of --duration seconds: its bounds and each process's CPU in it; with `settle`
        jobs, then until their ticks of the window finished."""
        window = Window(time.time(), time.time() + self.args.duration)
        await usage.open_window()
        say(f"{what} for {self.args.duration:g} s")
        await self._watch(conn, usage, window.start, window.end)
        cpu_s = await usage.close_window()
        if settle:
            await self._settle(conn, window, settle * len(window.ticks_ms))
        return window, cpu_s

    async def _watch(self, conn: asyncpg.Connection, usage: Usage, since: float, until: float) -> None:
        """Sample CPU every second until `until`; a progress line every --progress seconds."""
        next_line = time.monotonic() + self.args.progress
        self._counted_from = await self._counted()
        while (left := until - time.time()) > 0:
            await asyncio.sleep(min(1.0, left))
            self.roles.check_alive()
            await usage.sample()
            if time.monotonic() >= next_line or time.time() >= until:
                next_line = time.monotonic() + self.args.progress
                await self._progress(conn, usage, since)

    async def _progress(self, conn: asyncpg.Connection, usage: Usage, since: float) -> None:
        row = await conn.fetchrow(PROGRESS)
        counted = await self._counted()
        executed = counted - self._counted_from
        elapsed = max(time.time() - since, 1e-3)
        cpu_s = usage.cpu_s()
        cpu = " ".join(f"{name} {100 * s / elapsed:.0f}%" for name, s in cpu_s.items() if s is not None)
        # PostgreSQL's CPU per run executed since the last line: flat while a backlog grows, or not.
        pg_s = cpu_s.get("postgres")
        per_run = ""
        if pg_s is not None and self._last_line is not None and counted > self._last_line[1]:
            per_run = f"; postgres {1000 * (pg_s - self._last_line[0]) / (counted - self._last_line[1]):.3f} ms/run"
        self._last_line = (pg_s or 0.0, counted)
        say(
            f"  +{elapsed:4.0f}s executed {executed:,} ({executed / elapsed:,.0f}/s),"
            f" running {row['running']:,}, queued {row['queued']:,}; executions counted (all) {counted:,};"
            f" cpu {cpu}{per_run}"
        )

    async def _counted(self) -> int:
        """Executions the task has counted so far (every run's first one: cronos.bench.counter)."""
        return int(await self.client.hlen(executions_key(self.scratch.prefix)))

    async def _settle(self, conn: asyncpg.Connection, window: Window, expected: int) -> None:
        """Until every run of the window's ticks is finished and all are in the ledger, or --settle passes."""
        deadline = time.monotonic() + self.args.settle
        start, end = window.bounds
        while time.monotonic() < deadline:
            row = await conn.fetchrow(UNSETTLED, start, end)
            if row["open"] == 0 and row["total"] >= expected:
                return
            self.roles.check_alive()
            await asyncio.sleep(0.2)
        say(f"the window's ticks did not all finish within --settle {self.args.settle:g} s")


async def _register(http: aiohttp.ClientSession, base_url: str, count: int, payload: dict[str, Any]) -> list[int]:
    """Register the jobs paused, then resume them a chunk at a time through `POST /api/jobs/bulk`
    (label `bench-chunk`): registering active jobs one by one while the ones before fire made a
    10,000-job registration take minutes and load the cluster before the measurement began."""
    gate = asyncio.Semaphore(16)

    async def one(i: int) -> int:
        body = {
            "name": f"bench-{i:06d}",
            "cron_expression": "* * * * * *",
            "payload": payload,
            "status": "paused",
            "labels": {"bench-chunk": str(i // BULK_CHUNK)},
        }
        async with gate, http.post(f"{base_url}/api/jobs", json=body) as resp:
            reply = await resp.json(content_type=None)
            if resp.status != 201:
                raise RuntimeError(f"POST /api/jobs answered {resp.status}: {reply}")
            return int(reply["id"])

    async def resume(chunk: int) -> None:
        body = {"selector": f"bench-chunk={chunk}", "action": "resume"}
        async with gate, http.post(f"{base_url}/api/jobs/bulk", json=body) as resp:
            reply = await resp.json(content_type=None)
            if resp.status != 200 or reply.get("unchanged"):
                raise RuntimeError(f"POST /api/jobs/bulk answered {resp.status}: {reply}")

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(i)) for i in range(count)]
        async with asyncio.TaskGroup() as group:
            for chunk in range((count + BULK_CHUNK - 1) // BULK_CHUNK):
                group.create_task(resume(chunk))
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from failed
    return sorted(t.result() for t in tasks)


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any] | None, status: int) -> int:
    """POST `body`; the answer's job id (RuntimeError with the answer unless `status`)."""
    async with http.post(url, json=body) as resp:
        reply = await resp.json(content_type=None)
        if resp.status != status:
            raise RuntimeError(f"POST {url} answered {resp.status}: {reply}")
        return int(reply["id"])


async def _redis_pid(client: Any) -> int | None:
    info = await client.info("server")
    return int(info["process_id"]) if "process_id" in info else None


def stop_on_sigterm() -> None:
    """SIGTERM stops the benchmark as Ctrl-C does: the roles are stopped and the database dropped."""
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)


async def _main(bench: E2E) -> int:
    stop_on_sigterm()
    return 1 if (await bench.run()).failed else 0


def prepare(settings: Settings, args: argparse.Namespace, prog: str = "cronos bench e2e") -> E2E | None:
    """The benchmark for parsed arguments, or None once a bad one is told on stderr."""
    if args.jobs < 1 or args.executors < 1 or args.duration <= 0 or args.warmup < 0 or args.noisy < 0:
        print(
            f"{prog}: --jobs and --executors must be >= 1, --duration > 0, --warmup and --noisy >= 0", file=sys.stderr
        )
        return None
    try:
        return E2E(settings, args, role_env(args.env))
    except (ConfigError, ValueError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    bench = prepare(settings, args)
    if bench is None:
        return 2
    return run_to_exit(_main(bench), keep=args.keep, prog="cronos bench e2e")


def run_to_exit(main: Coroutine[Any, Any, int], keep: bool, prog: str) -> int:
    """Run a benchmark's main coroutine; its exit status, or 1 on a failure, 130 / 143 when interrupted."""
    try:
        return asyncio.run(main)
    except (TimeoutError, RuntimeError, aiohttp.ClientError) as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        dropped = "kept" if keep else "dropped"
        print(f"{prog}: interrupted; the roles are stopped, the database {dropped}", file=sys.stderr)
        return 130 if isinstance(exc, KeyboardInterrupt) else 143
