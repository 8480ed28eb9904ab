"""The dispatcher's and executor's probes (cronos/probes.py), on real processes: liveness (/livez,
and deploy/healthcheck.py, the image's HEALTHCHECK) fails while the role's event loop is stuck and
passes again once it runs; readiness (/readyz) fails while a backend is down, liveness does not.

Before, both probes read /metrics, which prometheus-client serves from a thread of its own: it
answered 200 all the while the loop was stuck (checked here too, as the control)."""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from cronos.probes import LOOP_DEADLINE_S
from tests.cluster.servers import free_port
from tests.deploy.manifests import ROOT
from tests.deploy.processes import Processes
from tests.deploy.test_healthcheck import hc
from tests.services import Services
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster

BLOCK_S = 8.0  # how long the task holds the executor's loop


def _get_now(url: str, timeout: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except (urllib.error.URLError, OSError):
        return 0, ""


async def _get(url: str, timeout: float = LOOP_DEADLINE_S + 2) -> tuple[int, float, str]:
    """(status, seconds it took, body; status 0 when nothing answered), by a new connection as the
    kubelet's probes and deploy/healthcheck.py make them."""
    started = time.monotonic()
    status, body = await asyncio.to_thread(_get_now, url, timeout)
    return status, time.monotonic() - started, body


def _env(database_url: str, redis_url: str, key_prefix: str, **more: str) -> dict[str, str]:
    return {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "CRONOS_KEY_PREFIX": key_prefix, **more}


async def test_liveness_fails_while_the_event_loop_is_stuck(
    processes: Processes, database_url: str, key_prefix: str, services: Services, tmp_path: Path
) -> None:
    token, api_port, metrics_port = secrets.token_hex(32), free_port(), free_port()
    backends = _env(database_url, services.redis_url, key_prefix)
    processes.start("api", ["api"], backends | {"PORT": str(api_port), "CRONOS_ADMIN_TOKEN": token})
    processes.start("dispatcher", ["dispatcher"], backends | {"CRONOS_METRICS_PORT": str(free_port())})
    executor_env = backends | {"CRONOS_METRICS_PORT": str(metrics_port), "PYTHONPATH": str(ROOT)}
    processes.start("executor", ["executor", "--import", "tests.deploy.loop_blocker"], executor_env)
    probes = f"http://127.0.0.1:{metrics_port}"
    api = f"http://127.0.0.1:{api_port}"
    timeout = aiohttp.ClientTimeout(total=LOOP_DEADLINE_S + 2)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:

        async def answers(path: str, status: int) -> bool:
            return (await _get(probes + path))[0] == status

        for path in ("/livez", "/readyz"):
            await wait_for(lambda p=path: answers(p, 200), timeout=30, what=f"executor {path} 200 ({tmp_path})")
        await wait_for(lambda: _api_up(api), timeout=30, what="the API")
        assert hc.check("executor", {"CRONOS_METRICS_PORT": str(metrics_port)})[0]

        job = {"name": "stuck", "cron_expression": "0 0 1 1 *", "payload": {"action": "block_loop", "seconds": BLOCK_S}}
        async with session.post(f"{api}/api/jobs", json=job) as response:
            assert response.status == 201, await response.text()
            job_id = (await response.json())["id"]
        async with session.post(f"{api}/api/jobs/{job_id}/trigger") as response:
            assert response.status == 202, await response.text()

        # Stuck: /livez says so within its deadline, while /metrics (the former probe) still answers.
        await wait_for(lambda: answers("/livez", 503), timeout=30, what=f"executor /livez 503 ({tmp_path})")
        status, took, _ = await _get(probes + "/livez")
        assert status == 503 and took < LOOP_DEADLINE_S + 1, (status, took)
        assert (await _get(probes + "/metrics"))[0] == 200, "the control: a thread answers /metrics"
        ok, detail = hc.check("executor", {"CRONOS_METRICS_PORT": str(metrics_port)})
        assert not ok and "/livez" in detail, detail

        # Running again: alive, and the run completed.
        await wait_for(lambda: answers("/livez", 200), timeout=BLOCK_S + 30, what="executor /livez 200 again")
        assert hc.check("executor", {"CRONOS_METRICS_PORT": str(metrics_port)})[0]

        async def ended() -> str | None:
            async with session.get(f"{api}/api/jobs/{job_id}/runs") as response:
                runs = (await response.json())["items"]
            return next((r["state"] for r in runs if r["finished_at"] is not None), None)

        assert await wait_for(ended, timeout=30, what="the blocking run to end") == "completed"
    for name in ("executor", "dispatcher", "api"):
        assert processes.stop(name) == 0, processes.log(name)[-3000:]


async def _api_up(api: str) -> bool:
    return (await _get(f"{api}/health"))[0] == 200


async def test_readiness_fails_while_a_backend_is_down_and_liveness_holds(
    processes: Processes, database_url: str, key_prefix: str
) -> None:
    """A dispatcher whose Redis does not answer waits for it at start: alive, not ready."""
    port = free_port()
    redis_down = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    processes.start(
        "dispatcher", ["dispatcher"], _env(database_url, redis_down, key_prefix, CRONOS_METRICS_PORT=str(port))
    )

    async def live() -> bool:
        return (await _get(f"http://127.0.0.1:{port}/livez"))[0] == 200

    await wait_for(live, timeout=30, what="dispatcher /livez 200 while Redis is down")
    status, _, body = await _get(f"http://127.0.0.1:{port}/readyz", timeout=LOOP_DEADLINE_S + 4)
    assert status == 503 and "redis" in body and "postgresql" not in body, (status, body)
    assert processes.stop("dispatcher") == 0, processes.log("dispatcher")[-3000:]


def test_a_probe_port_in_use_stops_the_role_with_one_line(processes: Processes, database_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))  # where the role would listen
        taken.listen()
        port = taken.getsockname()[1]
        proc = processes.start(
            "executor", ["executor"], {"DATABASE_URL": database_url, "CRONOS_METRICS_PORT": str(port)}
        )
        assert proc.wait(30) != 0
    last = processes.log("executor").strip().splitlines()[-1]
    assert last.startswith(f"cronos: CRONOS_METRICS_PORT: cannot listen on 0.0.0.0:{port}"), last
