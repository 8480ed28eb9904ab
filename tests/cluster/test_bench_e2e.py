"""Smoke test of `cronos bench e2e`: real api, dispatcher and executor processes, 50 jobs
every second for 5 s; every expected tick runs exactly once and the scratch database is gone after."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from cronos.settings import VARIABLES
from tests.services import Services

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cluster


async def _databases_like(admin_dsn: str, pattern: str) -> list[str]:
    conn = await asyncpg.connect(admin_dsn)
    try:
        rows = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE $1", pattern)
        return [r["datname"] for r in rows]
    finally:
        await conn.close()


def test_bench_e2e_runs_every_expected_tick_once(tmp_path: Path, services: Services) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if k not in VARIABLES and not k.startswith("CRONOS_")},
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": services.pg_admin_dsn,  # the server; the benchmark creates its own database on it
        "REDIS_URL": services.redis_url,
    }
    argv = [sys.executable, "-m", "cronos.cli", "bench", "e2e", "--jobs", "50", "--duration", "5"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=100, check=False)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr

    assert re.search(r"executions / expected\s+250 / 250 ", out), out
    assert re.search(r"completed runs / expected\s+250 / 250 ", out), out
    assert re.search(r"missed ticks\s+0 \(ledger\), 0 \(counter\)", out), out
    assert re.search(r"duplicate ticks\s+0 \(ledger\), 0 \(counter\)", out), out
    for figure in ("start delay", "task code start"):  # started_at - the tick; the task's code start - the tick
        assert re.search(rf"{figure}\s+p50 [\d.]+ ms, p99 [\d.]+ ms, max [\d.]+ ms", out), out
    task_p50 = float(re.search(r"task code start\s+p50 ([\d.]+) ms", out).group(1))  # type: ignore[union-attr]
    assert 0 < task_p50 < 2000, out  # measured, from the task's own start (250 runs: none could be 0)
    for process in ("api", "dispatcher", "executor-1", "postgres", "redis-server"):
        assert re.search(rf"^{process}\b", out, re.MULTILINE), out
    assert "+" in out and "completed" in out  # progress lines while it ran

    name = re.search(r"on (cronos_bench_\w+) ", out)
    assert name is not None, out
    assert asyncio.run(_databases_like(services.pg_admin_dsn, name[1])) == []
