"""`cronos bench overload`: a cluster offered more than it can run, then relieved (G8).

    cronos bench overload --jobs 1000 --duration 20
    cronos bench overload --jobs 1000 --duration 20 --base ../cronos-before --turns 2

Starts `cronos api`, one `cronos dispatcher` and --executors `cronos executor` processes at their
default settings on a fresh database and Redis key prefix, and registers --jobs every-second no-op
jobs one by one through `POST /api/jobs` (active, as a user does). Pick --jobs near what the
cluster just runs (`cronos bench e2e`): the runs that start per second with them are its capacity.
Then it registers as many again (offered 2x), and twice as many again (4x), measuring each load
--duration seconds after --warmup: runs started per second (the task's own count), CPU per
started run of the roles and the database's PostgreSQL backends together (from /proc), the
fairness of the runs among the jobs registered (fewest and median runs of a job, and the jobs
that got none: starved) and the most runs one job holds queued or waiting. Last it pauses every
job but the first half of --jobs (`POST /api/jobs/bulk`) and reports the recovery: the seconds
until the runs of the jobs left start on time again (within ON_TIME_S of their tick, 3 polls in a
row), which G8 bounds by twice the misfire grace, and how much of it the pauses took (the load
drops once they are through: on a loaded box the API pauses a chunk in seconds).

--base PATH runs the same against another checkout (a commit before, with its own .venv) in the
same sitting, alternating with this one --turns times each, and prints the two side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from cronos.bench.common import Scratch, delete_keys, free_port, say, scratch_database, table
from cronos.bench.counter import executions_key, task_payload
from cronos.bench.e2e import run_to_exit, stop_on_sigterm
from cronos.bench.roles import Roles, Usage
from cronos.bench.window import total_cpu_s
from cronos.lifecycle import ON_TIME_S
from cronos.redis_client import connect as connect_redis
from cronos.settings import Settings
from cronos.store.db import connect_one

FACTORS = (1, 2, 4)  # the loads offered, in --jobs
CHUNK = 250  # jobs a label value names: the relief pauses a chunk a call
RELIEF_TRIES_S = 120.0  # how long a pause the database refuses (503) is asked again
GRACE_S = 60.0  # the misfire grace the jobs get (the API's default): G8 bounds the recovery by twice it
# Runs of the jobs $3 started in ($1, $2], per job.
STARTED = (
    "SELECT job_id, count(*) AS runs FROM runs WHERE started_at > $1 AND started_at <= $2"
    " AND job_id = ANY($3::bigint[]) GROUP BY job_id"
)
# The most runs one job holds queued or waiting, and the skipped rows written in ($1, $2].
HELD = (
    "SELECT (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM runs"
    " WHERE state IN ('queued', 'waiting') GROUP BY job_id) p) AS most_pending,"
    " (SELECT count(*) FROM runs WHERE state = 'skipped' AND finished_at > $1 AND finished_at <= $2) AS skipped"
)
# Runs of the jobs $2 started after $1: how many, and the latest start's lateness past its due time.
LATE = (
    "SELECT count(*) AS runs, coalesce(max(extract(epoch FROM started_at - due_at)), 0) AS late_s"
    " FROM runs WHERE started_at > $1 AND job_id = ANY($2::bigint[])"
)


@dataclass
class Load:
    jobs: int
    started_per_s: float
    cpu_ms_per_run: float | None
    fewest: int
    median: float
    starved: int
    most_pending: int
    skipped_per_s: float


@dataclass
class Sitting:
    label: str
    loads: list[Load] = field(default_factory=list)
    recovery_s: float | None = None  # None: not on time again within the wait
    relief_s: float = 0.0  # of which the pauses took (the API under the load): the load drops after them


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronos bench overload", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, default=1000, help="jobs at capacity, each firing every second")
    p.add_argument("--duration", type=float, default=20.0, help="seconds measured at each load")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds between a load's registration and its window")
    p.add_argument("--executors", type=int, default=1, help="executor processes")
    p.add_argument("--base", type=Path, help="another checkout (with its .venv) measured alongside")
    p.add_argument("--turns", type=int, default=1, help="sittings of each checkout, alternating")
    p.add_argument("--progress", type=float, default=5.0, help="seconds between progress lines")
    return p


class Overload:
    def __init__(self, settings: Settings, args: argparse.Namespace, label: str, checkout: Path | None) -> None:
        self.settings = settings
        self.args = args
        self.label = label
        self.scratch = Scratch.new(settings.database_url)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"cronos-bench-overload-{self.scratch.tag}-"))
        port = free_port()
        self.roles = Roles(self.workdir, self.scratch.dsn, settings.redis_url, self.scratch.prefix, port, {}, checkout)
        self.client: Any = connect_redis(settings.redis_url)
        self.payload = task_payload("noop")
        # Another checkout runs on its own schema: its newest migration, not this one's.
        self.upto = None if checkout is None else newest_migration(checkout)

    async def run(self) -> Sitting:
        ok = False
        try:
            async with scratch_database(self.scratch, upto=self.upto) as dsn:
                conn = await connect_one(dsn)
                try:
                    sitting = await self._run(conn)
                    ok = True
                    return sitting
                finally:
                    self.roles.stop(timeout_s=5)
                    await conn.close()
        finally:
            await delete_keys(self.client, self.scratch.prefix)
            await self.client.aclose()
            if ok:
                shutil.rmtree(self.workdir, ignore_errors=True)
            else:
                print(f"role logs kept in {self.workdir}", file=sys.stderr)

    async def _run(self, conn: asyncpg.Connection) -> Sitting:
        args = self.args
        sitting = Sitting(self.label)
        say(f"[{self.label}] starting api, dispatcher, {args.executors} executor(s) (logs {self.workdir})")
        async with aiohttp.ClientSession() as http:
            self.roles.start(args.executors)
            await self.roles.wait_ready(http, conn, self.client)
            usage = Usage(self.roles, conn, self.scratch.db_name, None)
            jobs: list[int] = []
            for factor in FACTORS:
                target = factor * args.jobs
                say(f"[{self.label}] registering jobs {len(jobs) + 1:,}-{target:,} through POST /api/jobs")
                jobs += await self._register(http, len(jobs), target)
                await self._watch(usage, time.time() + args.warmup, f"{factor}x warm-up")
                sitting.loads.append(await self._measure(conn, usage, jobs, factor))
            sitting.recovery_s, sitting.relief_s = await self._relieve(http, conn, jobs)
        self.roles.stop()
        return sitting

    async def _register(self, http: aiohttp.ClientSession, start: int, end: int) -> list[int]:
        gate = asyncio.Semaphore(8)

        async def one(i: int) -> int:
            body = {
                "name": f"overload-{i:06d}",
                "cron_expression": "* * * * * *",
                "payload": self.payload,
                "misfire_grace_s": GRACE_S,
                "labels": {"bench-chunk": str(i // CHUNK)},
            }
            async with gate, http.post(f"{self.roles.base_url}/api/jobs", json=body) as resp:
                reply = await resp.json(content_type=None)
                if resp.status != 201:
                    raise RuntimeError(f"POST /api/jobs answered {resp.status}: {reply}")
                return int(reply["id"])

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(i)) for i in range(start, end)]
        return [t.result() for t in tasks]

    async def _counted(self) -> int:
        return int(await self.client.hlen(executions_key(self.scratch.prefix)))

    async def _watch(self, usage: Usage, until: float, what: str) -> None:
        """Sample CPU every second until `until`; a progress line every --progress seconds."""
        since, counted = time.time(), await self._counted()
        next_line = time.monotonic() + self.args.progress
        while (left := until - time.time()) > 0:
            await asyncio.sleep(min(1.0, left))
            self.roles.check_alive()
            await usage.sample()
            if time.monotonic() >= next_line:
                next_line = time.monotonic() + self.args.progress
                elapsed = time.time() - since
                started = await self._counted() - counted
                say(f"[{self.label}]   {what} +{elapsed:3.0f}s: {started / elapsed:,.0f} runs/s")

    async def _measure(self, conn: asyncpg.Connection, usage: Usage, jobs: list[int], factor: int) -> Load:
        args = self.args
        say(f"[{self.label}] measuring {len(jobs):,} jobs ({factor}x) for {args.duration:g} s")
        await usage.open_window()
        start, before = time.time(), await self._counted()
        await self._watch(usage, start + args.duration, f"{factor}x")
        end, after = time.time(), await self._counted()
        cpu = await usage.close_window()
        started = after - before
        t0, t1 = _instant(start), _instant(end)
        per_job = {r["job_id"]: r["runs"] for r in await conn.fetch(STARTED, t0, t1, jobs)}
        counts = [per_job.get(j, 0) for j in jobs]
        held = await conn.fetchrow(HELD, t0, t1)
        seconds = end - start
        return Load(
            jobs=len(jobs),
            started_per_s=started / seconds,
            cpu_ms_per_run=1000 * total_cpu_s(cpu) / started if started else None,
            fewest=min(counts),
            median=statistics.median(counts),
            starved=sum(1 for c in counts if c == 0),
            most_pending=held["most_pending"],
            skipped_per_s=held["skipped"] / seconds,
        )

    async def _pause(self, http: aiohttp.ClientSession, chunk: int, deadline: float) -> None:
        """Pause a chunk's jobs; an overloaded database's 503 is asked again until `deadline`."""
        while True:
            status, text = await _pause_once(http, f"{self.roles.base_url}/api/jobs/bulk", chunk)
            if status == 200:
                return
            if status != 503 or time.time() > deadline:
                raise RuntimeError(f"POST /api/jobs/bulk answered {status}: {text}")
            await asyncio.sleep(0.5)

    async def _relieve(
        self, http: aiohttp.ClientSession, conn: asyncpg.Connection, jobs: list[int]
    ) -> tuple[float | None, float]:
        """Pause all but the first half of --jobs; seconds until the rest start on time again, and
        how long the pauses took of it."""
        kept_chunks = max(1, self.args.jobs // 2 // CHUNK)
        kept = jobs[: kept_chunks * CHUNK]
        say(f"[{self.label}] relief: pausing all but {len(kept):,} jobs")
        began = time.time()
        for chunk in range(kept_chunks, (len(jobs) + CHUNK - 1) // CHUNK):
            await self._pause(http, chunk, began + RELIEF_TRIES_S)
        paused_s = time.time() - began
        say(f"[{self.label}] paused in {paused_s:.1f} s")
        in_a_row = 0
        on_time_since: float | None = None
        while (waited := time.time() - began) < 2 * GRACE_S + 30:
            await asyncio.sleep(0.5)
            self.roles.check_alive()
            row = await conn.fetchrow(LATE, _instant(time.time() - 1.0), kept)
            on_time = row["runs"] > 0 and float(row["late_s"]) <= ON_TIME_S
            in_a_row = in_a_row + 1 if on_time else 0
            if in_a_row == 1:
                on_time_since = waited
            if in_a_row >= 3:
                say(f"[{self.label}] on time again {on_time_since:.1f} s after the relief")
                return on_time_since, paused_s
        say(f"[{self.label}] not on time again within {2 * GRACE_S + 30:g} s")
        return None, paused_s


async def _pause_once(http: aiohttp.ClientSession, url: str, chunk: int) -> tuple[int, str]:
    body = {"selector": f"bench-chunk={chunk}", "action": "pause"}
    async with http.post(url, json=body) as resp:
        return resp.status, await resp.text()


def newest_migration(checkout: Path) -> int:
    """The number of a checkout's newest migration (cronos/store/migrations/NNNN_name.sql)."""
    names = (checkout / "cronos" / "store" / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql")
    return max(int(path.name[:4]) for path in names)


def _instant(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, UTC)


def render(sittings: Sequence[Sitting]) -> str:
    headers = ["", *(s.label for s in sittings)]
    rows: list[list[object]] = []
    for i, factor in enumerate(FACTORS):
        cells: list[list[object]] = [[f"{factor}x: jobs"], ["  runs started/s"], ["  / capacity (1x)"]]
        cells += [
            ["  CPU per run (roles + PostgreSQL)"],
            ["  / CPU per run at 1x"],
            ["  runs of a job: fewest / median"],
        ]
        cells += [["  jobs starved (no run)"], ["  most pending runs of a job"], ["  skipped rows/s"]]
        for s in sittings:
            load, base = s.loads[i], s.loads[0]
            cpu = "n/a" if load.cpu_ms_per_run is None else f"{load.cpu_ms_per_run:.2f} ms"
            ratio = (
                "n/a"
                if load.cpu_ms_per_run is None or not base.cpu_ms_per_run
                else f"{load.cpu_ms_per_run / base.cpu_ms_per_run:.2f}"
            )
            values: list[object] = [
                f"{load.jobs:,}",
                f"{load.started_per_s:,.0f}",
                f"{load.started_per_s / base.started_per_s:.2f}" if base.started_per_s else "n/a",
                cpu,
                ratio,
                f"{load.fewest} / {load.median:g}",
                f"{load.starved:,}",
                f"{load.most_pending:,}",
                f"{load.skipped_per_s:,.0f}",
            ]
            for row, value in zip(cells, values, strict=True):
                row.append(value)
        rows += cells
    rows.append(["on time again after the relief", *(_seconds(s.recovery_s) for s in sittings)])
    rows.append(["  of which pausing the jobs (the API)", *(f"{s.relief_s:.1f} s" for s in sittings)])
    return table(headers, rows)


def _seconds(value: float | None) -> str:
    return f"{value:.1f} s" if value is not None else f"not within {2 * GRACE_S + 30:g} s"


async def _main(settings: Settings, args: argparse.Namespace) -> int:
    stop_on_sigterm()
    order: list[tuple[str, Path | None]] = []
    for turn in range(1, args.turns + 1):
        suffix = f" #{turn}" if args.turns > 1 else ""
        if args.base is not None:
            order.append((f"base{suffix}", args.base))
        order.append((f"this{suffix}", None))
    sittings = [await Overload(settings, args, label, checkout).run() for label, checkout in order]
    print(f"\ncronos bench overload --jobs {args.jobs} --duration {args.duration:g} --executors {args.executors}")
    print(render(sittings), flush=True)
    return 0


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if args.jobs < CHUNK or args.executors < 1 or args.duration <= 0 or args.turns < 1:
        print(
            f"cronos bench overload: --jobs >= {CHUNK}, --executors and --turns >= 1, --duration > 0", file=sys.stderr
        )
        return 2
    if args.base is not None and not (args.base / ".venv" / "bin" / "python").exists():
        print(f"cronos bench overload: --base {args.base}: no .venv/bin/python there (make setup)", file=sys.stderr)
        return 2
    return run_to_exit(_main(settings, args), keep=False, prog="cronos bench overload")
