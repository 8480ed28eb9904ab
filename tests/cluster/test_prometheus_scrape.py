"""A real Prometheus server scrapes a running `cronos dev` and the series comes back from its query API.

Everything listens on 127.0.0.1 only. Needs the `prometheus` binary (Debian package
`prometheus`); skipped without it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from tests.cluster.servers import free_port
from tests.services import Services
from tests.waiting import wait_for

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus server not installed (apt-get install prometheus)"),
]

SCRAPE_CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: cronos-dev
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no output)"


class _Process:
    """A child process whose output goes to a file and which is always stopped."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.log = cwd / f"{name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    # The children run here, away from a developer's ./.env.
    return tmp_path


@pytest.fixture
def processes() -> Iterator[list[_Process]]:
    started: list[_Process] = []
    try:
        yield started
    finally:
        for process in reversed(started):
            process.stop()


async def _get_json(session: aiohttp.ClientSession, url: str, **params: str) -> Any:
    try:
        async with session.get(url, params=params, timeout=aiohttp.ClientTimeout(total=2)) as response:
            return await response.json() if response.status == 200 else None
    except (aiohttp.ClientError, TimeoutError):
        return None


async def test_prometheus_scrapes_cronos_dev_and_queries_a_series_back(
    services: Services,
    database_url: str,
    key_prefix: str,
    redis_client: aioredis.Redis,
    run_dir: Path,
    processes: list[_Process],
) -> None:
    assert PROMETHEUS is not None
    api_port, prom_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CRONOS_", "DATABASE_URL", "REDIS_URL", "PORT"))},
        "PORT": str(api_port),
        "DATABASE_URL": database_url,
        "REDIS_URL": services.redis_url,
        "CRONOS_KEY_PREFIX": key_prefix,
        "CRONOS_NODE_ID": "scrape-test",
        "CRONOS_LOG_FORMAT": "json",
    }
    cronos = _Process("cronos", [sys.executable, "-m", "cronos.cli", "dev"], run_dir, env)
    processes.append(cronos)

    config = run_dir / "prometheus.yml"
    config.write_text(SCRAPE_CONFIG.format(port=api_port))
    prometheus = _Process(
        "prometheus",
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={run_dir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        run_dir,
        {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(run_dir)},
    )
    processes.append(prometheus)

    api = f"http://127.0.0.1:{api_port}"
    query = f"http://127.0.0.1:{prom_port}/api/v1/query"
    async with aiohttp.ClientSession() as session:

        async def cronos_up() -> bool:
            assert cronos.alive(), f"cronos dev exited:\n{_tail(cronos.log)}"
            return await _get_json(session, f"{api}/health") is not None

        await wait_for(cronos_up, timeout=30, interval=0.2, what="cronos dev /health")

        for name in ("scrape one", "scrape two"):
            body = {"name": name, "cron_expression": "0 0 1 1 *", "payload": {"action": "noop"}}
            async with session.post(f"{api}/api/jobs", json=body) as response:
                assert response.status == 201, await response.text()

        async def active_jobs() -> list[Any]:
            assert prometheus.alive(), f"prometheus exited:\n{_tail(prometheus.log)}"
            answer = await _get_json(session, query, query='cronos_jobs{status="active"}')
            if not answer or answer.get("status") != "success":
                return []
            result: list[Any] = answer["data"]["result"]
            return result if result and result[0]["value"][1] == "2" else []

        try:
            (series,) = await wait_for(active_jobs, timeout=45, interval=0.5, what="cronos_jobs scraped by prometheus")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- prometheus ---\n{_tail(prometheus.log)}") from None

        assert series["metric"]["__name__"] == "cronos_jobs"
        assert series["metric"]["job"] == "cronos-dev"
        assert series["metric"]["instance"] == f"127.0.0.1:{api_port}"

        up = await _get_json(session, query, query='up{job="cronos-dev"}')
        assert up["data"]["result"][0]["value"][1] == "1"

        # The dispatcher's and executor's metrics come through the same endpoint in `cronos dev`.
        async def leader_scraped() -> bool:
            leader = await _get_json(session, query, query="cronos_leader")
            return bool(leader) and [r["value"][1] for r in leader["data"]["result"]] == ["1"]

        await wait_for(leader_scraped, timeout=15, interval=0.5, what="cronos_leader == 1 scraped")
