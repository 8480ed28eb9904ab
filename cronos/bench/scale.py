"""What the scale benchmarks (`herd`, `million`) share: roles started in two stages, and the
leader's own account of its schedule and tick writes, read from its log.

The jobs are bulk-registered (cronos.bench.bulk) between the stages: the API first (it creates
the template job), then the dispatcher and the executors, so the leader loads every job at its
election as it would after a restart. The dispatcher logs at DEBUG: its `ticks.queued` line
(one per tick-write round, with the round's rows and duration) is DEBUG unless the round
skipped ticks; the other roles keep their defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import msgspec

from cronos.bench.common import Scratch, delete_keys, free_port, pct, scratch_database
from cronos.bench.counter import COUNTER_TASK
from cronos.bench.roles import Roles
from cronos.redis_client import connect as connect_redis
from cronos.settings import Settings
from cronos.store.db import connect_one

LOADED = "schedule.loaded"
WRITTEN = "ticks.queued"


class StagedRoles(Roles):
    """Roles started in two stages: the API, then the dispatcher and the executors."""

    def start_api(self) -> None:
        self._spawn("api", ["api"], PORT=str(self.port))

    def start_rest(self, executors: int) -> None:
        self._spawn("dispatcher", ["dispatcher"], CRONOS_LOG_LEVEL="DEBUG")
        for i in range(1, executors + 1):
            self._spawn(f"executor-{i}", ["executor", "--import", "cronos.bench.counter"])

    async def wait_api(self, http: aiohttp.ClientSession, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_alive()
            try:
                async with http.get(f"{self.base_url}/health") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the API did not answer /health 200 in {timeout_s:g} s")
            await asyncio.sleep(0.2)

    def log_of(self, name: str) -> Path:
        return next(r.log for r in self.roles if r.name == name)


class Written(msgspec.Struct):
    """One tick-write round of the leader, from its `ticks.queued` log line."""

    ts: datetime  # when the round ended (its last batch committed and handed to the outbox)
    count: int = 0  # queued runs written
    rows: int = 0  # with the skipped ones
    duration_ms: float = 0.0  # the round's write: first batch planned -> last batch committed


class _Line(msgspec.Struct):
    event: str = ""
    jobs: int = 0


_line = msgspec.json.Decoder(_Line)
_written = msgspec.json.Decoder(Written)


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as log:
        for line in log:
            if line.startswith(b"{"):
                yield line


async def register(
    http: aiohttp.ClientSession, base_url: str, name: str, expression: str, labels: dict[str, str]
) -> int:
    """One job through POST /api/jobs, running the counting task; its id."""
    body = {"name": name, "cron_expression": expression, "payload": {"action": COUNTER_TASK}, "labels": labels}
    async with http.post(f"{base_url}/api/jobs", json=body) as resp:
        reply = await resp.json(content_type=None)
        if resp.status != 201:
            raise RuntimeError(f"POST /api/jobs answered {resp.status}: {reply}")
        return int(reply["id"])


def loaded_jobs(path: Path) -> int | None:
    """How many jobs the leader's last full schedule load held (None: none yet)."""
    found = None
    for raw in _lines(path):
        if LOADED.encode() in raw:
            found = _line.decode(raw).jobs
    return found


def written(path: Path) -> list[Written]:
    """Every tick-write round in the leader's log, oldest first."""
    return [_written.decode(raw) for raw in _lines(path) if WRITTEN.encode() in raw]


async def wait_loaded(roles: StagedRoles, jobs: int, timeout_s: float) -> float:
    """Until the leader logged a schedule load of at least `jobs` jobs; the seconds it took."""
    started = time.monotonic()
    path = roles.log_of("dispatcher")
    while (loaded_jobs(path) or 0) < jobs:
        roles.check_alive()
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"the leader did not load {jobs:,} jobs in {timeout_s:g} s (log {path})")
        await asyncio.sleep(0.5)
    return time.monotonic() - started


def proc_rss(pid: int) -> int | None:
    """Resident set size in bytes (VmRSS) of a live process, from /proc (None elsewhere)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    return next((int(line.split()[1]) * 1024 for line in lines if line.startswith("VmRSS:")), None)


def ms_summary(values: list[float]) -> dict[str, Any]:
    """first/median/p99/last of `values` (ms), as printed."""
    return {
        "first": min(values, default=0.0),
        "median": pct(values, 0.5),
        "p99": pct(values, 0.99),
        "last": max(values, default=0.0),
    }


class ScaleBench:
    """A scale benchmark's frame: its scratch database and key prefix, its staged roles, and what is
    removed after (the database, keys and role logs, unless --keep; the logs are kept on a failure).
    A benchmark implements `measure`."""

    name = "scale"

    def __init__(self, settings: Settings, args: argparse.Namespace) -> None:
        self.settings = settings
        self.args = args
        self.scratch = scratch = Scratch.new(settings.database_url)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"cronos-bench-{self.name}-{scratch.tag}-"))
        self.roles = StagedRoles(self.workdir, scratch.dsn, settings.redis_url, scratch.prefix, free_port(), {})
        self.client: Any = connect_redis(settings.redis_url)

    async def measure(self, conn: asyncpg.Connection) -> int:
        raise NotImplementedError

    async def run(self) -> int:
        ok = False
        try:
            async with scratch_database(self.scratch, keep=self.args.keep) as dsn:
                conn = await connect_one(dsn)
                try:
                    status = await self.measure(conn)
                    ok = True
                    return status
                finally:
                    self.roles.stop(timeout_s=5)
                    await conn.close()
        finally:
            if not self.args.keep:
                await delete_keys(self.client, self.scratch.prefix)
            await self.client.aclose()
            if ok and not self.args.keep:
                shutil.rmtree(self.workdir, ignore_errors=True)
            else:
                print(f"role logs kept in {self.workdir}", file=sys.stderr)


async def _run(bench: ScaleBench) -> int:
    # SIGTERM stops the benchmark as Ctrl-C does: the roles are stopped and the database dropped.
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    return await bench.run()


def run_bench(bench: ScaleBench) -> int:
    """Run a benchmark to its exit status (1: it failed, 130/143: interrupted)."""
    try:
        return asyncio.run(_run(bench))
    except (TimeoutError, RuntimeError, aiohttp.ClientError) as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        print(f"cronos bench {bench.name}: interrupted; the roles are stopped", file=sys.stderr)
        return 130 if isinstance(exc, KeyboardInterrupt) else 143
