"""What every benchmark needs: a scratch database and key prefix, role processes, /proc figures, tables.

A benchmark drives roles as `cronos` OS processes (never in-process), so its figures are
theirs: CPU and peak RSS come from /proc (Linux only; a figure is None elsewhere, or when
the pid belongs to another machine or container).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from cronos.bench.counter import COUNTER_TASK
from cronos.settings import VARIABLES
from cronos.store.db import migrate

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def with_database(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


def database_name(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/")


@dataclass(frozen=True, slots=True)
class Scratch:
    """A benchmark's own database (on the server of `server_dsn`) and Redis key prefix."""

    server_dsn: str
    tag: str

    @classmethod
    def new(cls, server_dsn: str) -> Scratch:
        return cls(server_dsn, uuid.uuid4().hex[:8])

    @property
    def db_name(self) -> str:
        return f"cronos_bench_{self.tag}"

    @property
    def dsn(self) -> str:
        return with_database(self.server_dsn, self.db_name)

    @property
    def prefix(self) -> str:
        return f"bench:{self.tag}:"


async def drop_database(server_dsn: str, name: str) -> None:
    admin = await asyncpg.connect(with_database(server_dsn, "postgres"))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def delete_keys(client: Any, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
    if keys:
        await client.delete(*keys)


@contextlib.asynccontextmanager
async def scratch_database(scratch: Scratch, keep: bool = False, upto: int | None = None) -> AsyncIterator[str]:
    """Create and migrate the scratch database (up to migration `upto`, if given: another
    checkout's schema); drop it on the way out unless `keep`."""
    try:
        await migrate(scratch.dsn, upto)
        yield scratch.dsn
    finally:
        if keep:
            print(f"kept database {scratch.db_name!r}", file=sys.stderr)
        else:
            await drop_database(scratch.server_dsn, scratch.db_name)


async def every_second_jobs(pool: asyncpg.Pool, n: int, name_prefix: str) -> list[int]:
    """N active every-second jobs of the counting task (cronos.bench.counter), inserted straight
    into a scratch database with the store's defaults (no API, no revisions): their ids in order."""
    await pool.execute(
        "INSERT INTO jobs (name, cron_expression, payload, timeout_s)"
        " SELECT $3 || g, '* * * * * *', $1, 30 FROM generate_series(1, $2) g",
        {"action": COUNTER_TASK},
        n,
        name_prefix,
    )
    return [r["id"] for r in await pool.fetch("SELECT id FROM jobs ORDER BY id")]


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (nearest rank) of `values`; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def say(text: str) -> None:
    """A progress line, timestamped."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned first column, the others right-aligned."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


# --- processes ---


def proc_name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def proc_peak_rss(pid: int) -> int | None:
    """Peak resident set size in bytes (VmHWM) of a live process."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def clean_environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment without any Cronos variable: a role started with it has default settings."""
    source = os.environ if base is None else base
    return {k: v for k, v in source.items() if k not in VARIABLES and not k.startswith("CRONOS_")}


def cronos_argv(*args: str) -> list[str]:
    """`cronos ARGS` run by this interpreter (its pid is the role's own, no wrapper in between)."""
    return [sys.executable, "-m", "cronos.cli", *args]


def package_root() -> str:
    """Where `cronos` is imported from, for a PYTHONPATH that works in any working directory."""
    return str(Path(__file__).resolve().parents[2])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_processes(procs: Sequence[subprocess.Popen[bytes]], timeout_s: float = 30.0) -> None:
    """SIGTERM all, wait up to `timeout_s` for all, then SIGKILL what is left."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
