"""`cronos bench e2e`'s cluster: api, one dispatcher and K executors as `cronos` OS processes,
and what they, the database's PostgreSQL backends and redis-server cost in CPU and memory.

Roles start from a clean environment in a scratch working directory (no ./.env), so they
run on the default settings plus the benchmark's database, key prefix, node ids, port and
whatever `--env` adds.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from cronos.bench.common import (
    clean_environ,
    cronos_argv,
    package_root,
    proc_cpu_s,
    proc_name,
    proc_peak_rss,
    stop_processes,
)
from cronos.keys import Keys


@dataclass
class Role:
    name: str  # api, dispatcher, executor-1 ...
    proc: subprocess.Popen[bytes]
    log: Path


class Roles:
    """The benchmark's role processes: start, wait until serving, stop."""

    def __init__(
        self,
        workdir: Path,
        dsn: str,
        redis_url: str,
        prefix: str,
        port: int,
        env: Mapping[str, str],
        checkout: Path | None = None,
    ) -> None:
        self.workdir = workdir
        self.port = port
        self.keys = Keys(prefix)
        # Another checkout's roles (a commit before, side by side): its code with its own venv's Python.
        self._python = None if checkout is None else str(checkout / ".venv" / "bin" / "python")
        root = package_root() if checkout is None else str(checkout)
        self._base = {
            **clean_environ(),
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
            **env,
            "DATABASE_URL": dsn,
            "REDIS_URL": redis_url,
            "CRONOS_KEY_PREFIX": prefix,
        }
        self.roles: list[Role] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, executors: int, imports: tuple[str, ...] = ()) -> None:
        """The roles; the executors load cronos.bench.counter's task and those of `imports`."""
        self._spawn("api", ["api"], PORT=str(self.port))
        self._spawn("dispatcher", ["dispatcher"])
        loads = [arg for module in ("cronos.bench.counter", *imports) for arg in ("--import", module)]
        for i in range(1, executors + 1):
            self._spawn(f"executor-{i}", ["executor", *loads])

    @property
    def executor_node_ids(self) -> list[str]:
        return [_node_id(r.name) for r in self.roles if r.name.startswith("executor-")]

    def _spawn(self, name: str, args: list[str], **extra: str) -> None:
        log = self.workdir / f"{name}.log"
        env = {**self._base, "CRONOS_NODE_ID": _node_id(name), **extra}
        with log.open("wb") as out:
            # A session of its own: Ctrl-C reaches the benchmark only, which then stops the roles.
            proc = subprocess.Popen(
                cronos_argv(*args) if self._python is None else [self._python, "-m", "cronos.cli", *args],
                env=env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.roles.append(Role(name, proc, log))

    def check_alive(self) -> None:
        for role in self.roles:
            if role.proc.poll() is not None:
                tail = role.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{role.name} exited ({role.proc.returncode}); log {role.log}:\n{tail}")

    async def wait_ready(self, http: aiohttp.ClientSession, conn: asyncpg.Connection, client: Any) -> None:
        """Until the API answers /health 200, a leader is elected and every executor beats."""
        executors = sum(1 for r in self.roles if r.name.startswith("executor-"))
        deadline = time.monotonic() + 60
        while True:
            self.check_alive()
            beating = [k async for k in client.scan_iter(match=self.keys.node_heartbeat("executor", "*"))]
            holder = await conn.fetchval("SELECT holder FROM leader_epoch WHERE epoch > 0")
            if len(beating) >= executors and holder is not None and await self._healthy(http):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"roles not ready in 60 s (executors {len(beating)}/{executors}, leader {holder})")
            await asyncio.sleep(0.2)

    async def _healthy(self, http: aiohttp.ClientSession) -> bool:
        try:
            async with http.get(f"{self.base_url}/health") as resp:
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    def stop(self, timeout_s: float = 45.0) -> None:
        stop_processes([r.proc for r in self.roles], timeout_s)


def _node_id(role: str) -> str:
    return f"bench-{role}"


@dataclass
class _Cpu:
    """CPU seconds of processes that come and go: the first and last reading of each pid."""

    first: dict[int, float] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)

    def read(self, pid: int, in_window: bool) -> None:
        cpu = proc_cpu_s(pid)
        if cpu is None:
            return
        # A pid first seen inside the window started after it opened (within one sample).
        self.first.setdefault(pid, 0.0 if in_window else cpu)
        self.last[pid] = cpu

    def open(self) -> None:
        self.first = dict(self.last)

    @property
    def seconds(self) -> float:
        return sum(self.last[pid] - self.first.get(pid, 0.0) for pid in self.last)


class Usage:
    """CPU over the measured window of each role, of the database's backends and of redis-server."""

    def __init__(self, roles: Roles, conn: asyncpg.Connection, db_name: str, redis_pid: int | None) -> None:
        self.roles = roles
        self._conn = conn
        self._db = db_name
        self._redis_pid = redis_pid if redis_pid and (proc_name(redis_pid) or "").startswith("redis-server") else None
        self._cpu: dict[str, _Cpu] = {r.name: _Cpu() for r in roles.roles} | {"postgres": _Cpu(), "redis": _Cpu()}
        self._pg_local = False
        self._in_window = False
        self.backends: set[int] = set()

    async def sample(self) -> None:
        for role in self.roles.roles:
            self._cpu[role.name].read(role.proc.pid, self._in_window)
        pids = await self._conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", self._db
        )
        for row in pids:
            if proc_name(row["pid"]) == "postgres":  # else the server is remote or in a container
                self._pg_local = True
                self.backends.add(row["pid"])
                self._cpu["postgres"].read(row["pid"], self._in_window)
        if self._redis_pid is not None:
            self._cpu["redis"].read(self._redis_pid, self._in_window)

    async def open_window(self) -> None:
        await self.sample()
        self._in_window = True
        for cpu in self._cpu.values():
            cpu.open()

    async def close_window(self) -> dict[str, float | None]:
        await self.sample()
        self._in_window = False
        return self.cpu_s()

    def cpu_s(self) -> dict[str, float | None]:
        """CPU seconds since the window opened, by row name; None where the process cannot be read."""
        found: dict[str, float | None] = {r.name: self._cpu[r.name].seconds for r in self.roles.roles}
        found["postgres"] = self._cpu["postgres"].seconds if self._pg_local else None
        found["redis"] = self._cpu["redis"].seconds if self._redis_pid is not None else None
        return found

    def peak_rss(self) -> dict[str, int | None]:
        return {r.name: proc_peak_rss(r.proc.pid) for r in self.roles.roles}
