"""The seed's story through the API on a real `cronos dev`: register, run on schedule, trigger, pause.

One process runs the API, a dispatcher and an executor on the test's own database and
key prefix; everything is observed over HTTP only, as a user would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cronos.settings import VARIABLES
from tests.cluster.servers import free_port
from tests.services import Services
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
CRONOS = str(Path(sys.executable).parent / "cronos")
pytestmark = pytest.mark.cluster


def _start_dev(cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [CRONOS, "dev", "--import", "tests.cluster.tasks"], cwd=cwd, env=env, stdout=out, stderr=out
        )


async def test_register_run_trigger_pause_through_the_api(
    tmp_path: Path, services: Services, database_url: str, key_prefix: str
) -> None:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in VARIABLES},
        "PYTHONPATH": str(REPO),
        "PORT": str(port),
        "DATABASE_URL": database_url,
        "REDIS_URL": services.redis_url,
        "CRONOS_KEY_PREFIX": key_prefix,
        "CRONOS_NODE_ID": "e2e",
        "CRONOS_LOG_FORMAT": "json",
        "CRONOS_LEADER_TTL_MS": "1500",
    }
    log = tmp_path / "cronos.log"
    proc = _start_dev(tmp_path, env, log)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:

            async def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
                async with http.request(method, base + path, json=body) as resp:
                    return resp.status, await resp.json(content_type=None)

            async def healthy() -> bool:
                assert proc.poll() is None, log.read_text()[-3000:]
                try:
                    return (await call("GET", "/health"))[0] == 200
                except aiohttp.ClientConnectionError:
                    return False

            await wait_for(healthy, timeout=30, interval=0.2, what="cronos dev /health")

            seed = {"name": "Sync Database Indexes", "cron_expression": "* * * * * *", "payload": {"action": "noop"}}
            status, job = await call("POST", "/api/jobs", seed)
            assert status == 201, job

            async def scheduled_runs_completed() -> list[Any]:
                _, page = await call("GET", f"/api/jobs/{job['id']}/runs?state=completed")
                done = [r for r in page["items"] if r["trigger"] == "schedule"]
                return done if len(done) >= 2 else []

            done = await wait_for(scheduled_runs_completed, timeout=20, interval=0.2, what="two scheduled runs")
            assert all(r["node_id"] == "e2e" and r["attempt"] == 1 for r in done)

            status, run = await call("POST", f"/api/jobs/{job['id']}/trigger")
            assert status == 202 and run["trigger"] == "manual"

            async def manual_done() -> dict[str, Any] | None:
                _, got = await call("GET", f"/api/runs/{run['id']}")
                return got if got["state"] == "completed" else None

            finished = await wait_for(manual_done, timeout=15, interval=0.1, what="the manual run to complete")
            assert finished is not None and finished["started_at"] and finished["duration_ms"] is not None

            status, paused = await call("PATCH", f"/api/jobs/{job['id']}/toggle")
            assert status == 200 and paused["status"] == "paused" and paused["next_run_at"] is None
            _, detail = await call("GET", f"/api/jobs/{job['id']}")
            assert detail["last_run"] is not None

            _, cluster = await call("GET", "/api/cluster")
            assert cluster["leader"]["node_id"] is not None and cluster["leader"]["epoch"] >= 1
            assert {n["role"] for n in cluster["nodes"]} >= {"dispatcher", "executor"}
            assert cluster["stream"] is not None and cluster["stream"]["pending"] == 0

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
