"""Smoke tests of `cronos bench herd` and `cronos bench million`: real api, dispatcher and
executor processes on a scratch database; the printed fields are there, no run is missed, and
the scratch database is gone after."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cronos.settings import VARIABLES
from tests.cluster.test_bench_e2e import _databases_like  # one scratch-database check for every bench
from tests.services import Services

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cluster
SECONDS = r"[+-]\d+\.\d\d s"


def _bench(tmp_path: Path, services: Services, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if k not in VARIABLES and not k.startswith("CRONOS_")},
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": services.pg_admin_dsn,  # the server; the benchmark creates its own database on it
        "REDIS_URL": services.redis_url,
    }
    argv = [sys.executable, "-m", "cronos.cli", "bench", *args]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _dropped(out: str, services: Services) -> None:
    name = re.search(r"on (cronos_bench_\w+) ", out)
    assert name is not None, out
    assert asyncio.run(_databases_like(services.pg_admin_dsn, name[1])) == []


def test_bench_herd_starts_every_job_of_the_herd_once(tmp_path: Path, services: Services) -> None:
    # A herd every 10 s (seconds-first cron) instead of every minute: the test waits 10 s at most for it.
    done = _bench(tmp_path, services, "herd", "--jobs", "300", "--schedule", "*/10 * * * * *", timeout=120)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr

    assert re.search(r"herd tick\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d0 UTC \(300 jobs\)", out), out
    assert re.search(rf"tick write finished\s+{SECONDS} \(300 runs in 1 round\(s\), [\d,]+ ms writing\)", out), out
    assert re.search(rf"tokens pushed\s+first {SECONDS}, last {SECONDS}", out), out
    for figure in ("claimed \\(started_at\\)", "task start"):
        assert re.search(rf"{figure}\s+first {SECONDS}, median {SECONDS}, p99 {SECONDS}, last {SECONDS}", out), out
    assert re.search(r"target\s+last task start <= \+15 s: met", out), out
    assert re.search(r"missed runs\s+0 \(counter\), 0 \(ledger\)", out), out
    assert re.search(r"duplicated runs\s+0 \(counter\), 0 \(ledger\)", out), out
    assert re.search(r"herd run states\s+completed 300$", out, re.MULTILINE), out
    for process in ("api", "dispatcher", "executor-1", "postgres", "redis-server"):
        assert re.search(rf"^{process}\b", out, re.MULTILINE), out
    _dropped(out, services)


def test_bench_million_prints_the_leaders_memory_tick_writes_and_page_times(tmp_path: Path, services: Services) -> None:
    args = ("million", "--jobs", "5000", "--warmup", "2", "--window", "5", "--requests", "3")
    done = _bench(tmp_path, services, *args, timeout=150)
    out = done.stdout
    # Its figures against the targets (exit 1 when one is missed) are a measure, not this test's verdict.
    assert done.returncode in (0, 1) and "bench failed" not in done.stderr, out + done.stderr

    assert re.search(r"leader RSS\s+[\d,]+ MB after loading 5,000 jobs in [\d.]+ s", out), out
    assert re.search(r"catch-up\s+[\d,]+ rows in \d+ rounds before the window.* then [\d.]+ s until no run", out), out
    assert re.search(r"tick write\s+p50 [\d.]+ ms, p99 [\d.]+ ms, max [\d.]+ ms over [1-9]\d* rounds", out), out
    pages: dict[str, int | None] = {
        "GET /api/jobs first page": 50,
        "GET /api/jobs deep page": 50,
        "GET /api/jobs label selector": 50,
        "console: overview first page": 25,
        "console: name search": 1,  # one job's name
        "console: label selector": 25,
        "console: page health": None,  # verdicts as recorded so far
    }
    for name, items in pages.items():
        count = r"\d+" if items is None else str(items)
        pattern = rf"{re.escape(name)}\s+p50 [\d.]+ ms, p99 [\d.]+ ms, max [\d.]+ ms \({count} items, HTTP 200\)"
        assert re.search(pattern, out), out
    _dropped(out, services)


def test_bench_ledger_records_every_run_and_prints_postgres_cpu_per_phase(tmp_path: Path, services: Services) -> None:
    done = _bench(tmp_path, services, "ledger", "--jobs", "60", "--rounds", "3", "--batch", "25", timeout=90)
    out = done.stdout
    if "not a local process" in out:
        pytest.skip("PostgreSQL runs in a container: its backend's CPU cannot be read from /proc here")
    assert done.returncode == 0, out + done.stderr  # 1: a tick not written, claimed and finished whole

    figures = r"\s+(\d+\.\d{3})\s+(\d+\.\d{3})"
    for phase in ("tick write", "claim", "finish"):
        assert re.search(rf"^{phase}{figures}\s+[\d.]+\s+[\d.]+$", out, re.MULTILINE), out
    total = re.search(rf"^all{figures}$", out, re.MULTILINE)
    assert total is not None and float(total[1]) > 0, out  # the backend's CPU was read, not assumed
    assert re.search(r"^runs recorded\s+180$", out, re.MULTILINE), out
    assert re.search(r"^postgres alone\s+[\d,]+ runs a second of one core$", out, re.MULTILINE), out
    _dropped(out, services)


def test_bench_ledger_batches_as_the_executor_claims() -> None:
    from cronos.bench.ledger import _parser
    from executor.deps import CLAIM_BATCH

    assert _parser().parse_args([]).batch == CLAIM_BATCH


def test_bench_ledger_refuses_an_empty_round(tmp_path: Path, services: Services) -> None:
    done = _bench(tmp_path, services, "ledger", "--jobs", "0", timeout=30)
    assert (
        done.returncode == 2
        and done.stdout.strip() == "cronos bench ledger: --jobs, --rounds and --batch must be at least 1"
    )
