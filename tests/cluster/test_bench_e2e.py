"""Smoke tests of `cronos bench e2e`: real api, dispatcher and executor processes. 50 no-op jobs
every second for 5 s: every expected tick runs exactly once, the start delay is measured at the
task and at the claim, each executor's share is printed, and the scratch database is gone after;
20 CPU-bound jobs (4 ms each) on 2 executors: each executor's share of the runs."""

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
DELAYS = r"p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms"


async def _databases_like(admin_dsn: str, pattern: str) -> list[str]:
    conn = await asyncpg.connect(admin_dsn)
    try:
        rows = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE $1", pattern)
        return [r["datname"] for r in rows]
    finally:
        await conn.close()


def _bench(tmp_path: Path, services: Services, *args: str, timeout_s: float = 55) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if k not in VARIABLES and not k.startswith("CRONOS_")},
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": services.pg_admin_dsn,  # the server; the benchmark creates its own database on it
        "REDIS_URL": services.redis_url,
    }
    argv = [sys.executable, "-m", "cronos.cli", "bench", *args]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _delays(out: str, label: str) -> tuple[float, float, float]:
    found = re.search(rf"^  {label}\s+{DELAYS}", out, re.MULTILINE)
    assert found is not None, out
    p50, p99, top = (float(x) for x in found.groups())
    return p50, p99, top


def _shares(out: str) -> dict[str, tuple[int, float]]:
    line = re.search(r"^  executor shares\s+(.*)$", out, re.MULTILINE)
    assert line is not None, out
    found = re.findall(r"(bench-executor-\d+) ([\d,]+) \(([\d.]+)%\)", line[1])
    return {node: (int(n.replace(",", "")), float(share)) for node, n, share in found}


def test_bench_e2e_runs_every_expected_tick_once(tmp_path: Path, services: Services) -> None:
    out = _bench(tmp_path, services, "e2e", "--jobs", "50", "--duration", "5")

    assert re.search(r"executions / expected\s+250 / 250 ", out), out
    assert re.search(r"completed runs / expected\s+250 / 250 ", out), out
    assert re.search(r"missed ticks\s+0 \(ledger\), 0 \(counter\)", out), out
    assert re.search(r"duplicate ticks\s+0 \(ledger\), 0 \(counter\)", out), out
    task = _delays(out, "start delay at the task")
    claim = _delays(out, "start delay at the claim")
    assert 0 < task[0] < 2000, out  # measured, from the task's own start (250 runs: none could be 0)
    # Each run's task starts after its claim (one clock, the same machine): so do the quantiles.
    assert task[0] >= claim[0] - 1 and task[1] >= claim[1] - 1 and task[2] >= claim[2] - 1, out
    assert re.search(r"^  cpu per run\s+[\d.]+ ms", out, re.MULTILINE), out
    assert _shares(out) == {"bench-executor-1": (250, 100.0)}, out
    by_executor = r"at the task, by executor\s+bench-executor-1 p50 [\d.]+ ms, p99 [\d.]+ ms$"
    assert re.search(by_executor, out, re.MULTILINE), out
    for process in ("api", "dispatcher", "executor-1", "postgres", "redis-server"):
        assert re.search(rf"^{process}\b", out, re.MULTILINE), out
    progress = r"\+ *\d+s executed [\d,]+ \([\d,]+/s\), running [\d,]+, queued [\d,]+; executions counted"
    assert re.search(progress, out), out  # progress lines while it ran

    name = re.search(r"on (cronos_bench_\w+) ", out)
    assert name is not None, out
    assert asyncio.run(_databases_like(services.pg_admin_dsn, name[1])) == []


def test_bench_e2e_cpu_task_prints_each_executors_share(tmp_path: Path, services: Services) -> None:
    out = _bench(tmp_path, services, "e2e", "--jobs", "20", "--duration", "4", "--executors", "2", "--task", "cpu:4ms")

    assert "--task cpu:4ms" in out, out
    assert re.search(r"executions / expected\s+80 / 80 ", out), out
    shares = _shares(out)
    assert set(shares) == {"bench-executor-1", "bench-executor-2"}, out
    assert sum(n for n, _ in shares.values()) == 80, out
    assert abs(sum(share for _, share in shares.values()) - 100) < 0.2, out
    assert len(re.findall(r"bench-executor-\d p50 [\d.]+ ms, p99", out)) == 2, out  # at the task, by executor
    # 4 ms of CPU before the stamp is written cannot hide: the executors burnt at least 80 x 4 ms.
    burnt = sum(float(s) for s in re.findall(r"^executor-\d\s+([\d.]+)", out, re.MULTILINE))
    assert burnt >= 0.25, out  # /proc counts in 10 ms steps, and the window edges cut a few runs


@pytest.mark.timeout(120)
def test_bench_e2e_noisy_sets_the_no_op_jobs_alone_beside_them_with_noisy_jobs(
    tmp_path: Path, services: Services
) -> None:
    # Two windows, and a shell job printing 10 MB: more time than the others.
    out = _bench(
        tmp_path, services, "e2e", "--jobs", "20", "--duration", "4", "--warmup", "1", "--noisy", "2", timeout_s=100
    )

    assert "--noisy 2" in out, out
    rows = re.findall(
        r"^(alone|beside the noisy jobs)\s+([\d,]+)\s+[\d.]+ ms\s+[\d.]+ ms\s+[\d.]+ ms", out, re.MULTILINE
    )
    assert [name for name, _ in rows] == ["alone", "beside the noisy jobs"], out
    assert all(runs == "80" for _, runs in rows), out  # every tick of both windows
    noisy = re.search(r"^noisy runs: completed (\d+)\b.*their output lines kept: ([\d,]+)$", out, re.MULTILINE)
    assert noisy is not None and int(noisy[1]) >= 2, out  # at least one of each, every 2 s over 4 s
    # A chatty run keeps its 1,000 lines, a shell run its head, the cut line and its tail (2,001).
    assert int(noisy[2].replace(",", "")) >= 3001, out


def test_bench_e2e_refuses_an_unknown_task(tmp_path: Path, services: Services) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DATABASE_URL": services.pg_admin_dsn}
    argv = [sys.executable, "-m", "cronos.cli", "bench", "e2e", "--task", "cpu:4"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "expected noop or cpu:<N>ms" in done.stderr, done.stderr
