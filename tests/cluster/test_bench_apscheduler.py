"""Smoke tests of `cronos bench apscheduler` (an in-process APScheduler 3, 20 jobs every second
for 3 s: every tick runs once, start delay measured at the task) and `cronos bench compare` (it,
then Cronos end to end, side by side with the ratios)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cronos.settings import VARIABLES
from tests.services import Services

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cluster


def _bench(tmp_path: Path, services: Services, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if k not in VARIABLES and not k.startswith("CRONOS_")},
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": services.pg_admin_dsn,
        "REDIS_URL": services.redis_url,
    }
    argv = [sys.executable, "-m", "cronos.cli", "bench", *args]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=55, check=False)


def test_bench_apscheduler_runs_every_tick_once(tmp_path: Path, services: Services) -> None:
    done = _bench(tmp_path, services, "apscheduler", "--jobs", "20", "--duration", "3", "--warmup", "2")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr

    assert "AsyncIOScheduler, MemoryJobStore, AsyncIOExecutor, CronTrigger(second=*)" in out, out
    assert "misfire_grace_time 1 s, coalesce True, max_instances 1" in out, out  # APScheduler's defaults
    assert re.search(r"executions / expected\s+60 / 60$", out, re.MULTILINE), out
    assert re.search(r"missed ticks\s+0$", out, re.MULTILINE), out
    assert re.search(r"duplicate ticks\s+0$", out, re.MULTILINE), out
    delays = re.search(r"start delay at the task\s+p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms", out)
    assert delays is not None, out
    p50, p99, top = (float(x) for x in delays.groups())
    assert 0 < p50 <= p99 <= top < 1000, out  # at the task, after its whole-second fire time
    assert re.search(r"runs/s\s+20\.0 ", out), out
    assert re.search(r"cpu per run\s+[\d.]+ ms \(this process", out), out


def test_bench_compare_prints_both_side_by_side(tmp_path: Path, services: Services) -> None:
    done = _bench(tmp_path, services, "compare", "--jobs", "10", "--duration", "3", "--warmup", "2")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr

    assert "cronos bench apscheduler --jobs 10" in out and "cronos bench e2e --jobs 10" in out, out
    tail = out[out.index("cronos bench compare") :]
    for row in ("start delay at the task p50", "start delay at the task p99", "cpu per run"):
        # APScheduler's figure, Cronos's, and the ratio Cronos / APScheduler.
        assert re.search(rf"^{row}\s+[\d.]+ ms\s+[\d.]+ ms\s+[\d.]+$", tail, re.MULTILINE), tail
    assert re.search(r"^missed / duplicate ticks\s+0 / 0\s+0 / 0$", tail, re.MULTILINE), tail
