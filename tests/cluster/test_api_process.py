"""`cronos api` as a real process: serves the seed contract, starts with a backend down, stops on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from cronos.settings import VARIABLES
from tests.cluster.servers import free_port
from tests.integration.api_client import HEALTHY
from tests.waiting import wait_for

CRONOS = str(Path(sys.executable).parent / "cronos")
pytestmark = pytest.mark.cluster


def _start(tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    return subprocess.Popen(
        [CRONOS, "api"],
        cwd=tmp_path,
        env={**clean, "CRONOS_LOG_FORMAT": "json", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _get(url: str) -> tuple[int, dict[str, str]] | None:
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return resp.status, await resp.json()
    except aiohttp.ClientConnectionError:
        return None


async def test_api_process_serves_and_stops_on_sigterm(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    port = free_port()
    proc = _start(tmp_path, PORT=str(port), DATABASE_URL=database_url, CRONOS_KEY_PREFIX=key_prefix)
    try:
        health = await wait_for(lambda: _get(f"http://127.0.0.1:{port}/health"), timeout=20, what="/health")
        assert health == (200, HEALTHY)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert '"event":"api.stopped"' in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


async def test_api_process_starts_while_postgres_is_down(tmp_path: Path, key_prefix: str) -> None:
    port, dead = free_port(), free_port()
    dsn = f"postgresql://cronos:hunter2-secret@127.0.0.1:{dead}/cronos"
    proc = _start(tmp_path, PORT=str(port), DATABASE_URL=dsn, CRONOS_KEY_PREFIX=key_prefix)
    try:
        health = await wait_for(lambda: _get(f"http://127.0.0.1:{port}/health"), timeout=20, what="/health")
        assert health is not None and health[0] == 503 and health[1]["database"] == "PostgreSQL Disconnected"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert "hunter2" not in err  # the password never reaches the logs
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_api_process_refuses_protected_mode_beyond_loopback(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    proc = _start(
        tmp_path,
        PORT=str(free_port()),
        DATABASE_URL=database_url,
        CRONOS_KEY_PREFIX=key_prefix,
        CRONOS_API_HOST="0.0.0.0",
    )
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cronos: CRONOS_API_HOST=0.0.0.0 is not loopback-only"), err
    assert "CRONOS_AUTH=required" in lines[0] and "CRONOS_API_HOST=127.0.0.1" in lines[0] and out == ""


@pytest.mark.parametrize(
    ("env", "host", "level"),
    [({}, "127.0.0.1", "warning"), ({"CRONOS_AUTH": "required"}, "0.0.0.0", "info")],
)
async def test_api_process_says_which_auth_mode_is_in_force(
    tmp_path: Path, database_url: str, key_prefix: str, env: dict[str, str], host: str, level: str
) -> None:
    port = free_port()
    proc = _start(tmp_path, PORT=str(port), DATABASE_URL=database_url, CRONOS_KEY_PREFIX=key_prefix, **env)
    try:
        await wait_for(lambda: _get(f"http://127.0.0.1:{port}/health"), timeout=20, what="/health")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    modes = [json.loads(line) for line in err.splitlines() if '"event":"api.auth_mode"' in line]
    assert [(m["level"], m["host"]) for m in modes] == [(level, host)], err
