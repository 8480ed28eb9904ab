"""`shell` jobs, run by a real executor."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from cronos.keys import Keys
from cronos.settings import Settings
from cronos.stream import RunStream
from executor.service import Executor
from tests.integration.ledger_helpers import Harness
from tests.waiting import wait_for


@pytest.fixture
async def harness(pg_pool: Any, redis_client: aioredis.Redis, settings: Settings) -> Harness:
    stream = RunStream(redis_client, Keys(settings.key_prefix))
    await stream.ensure_group()
    return Harness(pg_pool, stream)


async def test_shell_is_refused_by_default(harness: Harness, settings: Settings) -> None:
    job = await harness.job(kind="shell", payload={"argv": ["echo", "hi"]})
    await harness.queue(job)
    async with Executor(settings) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert run.state == "failed" and run.error is not None and "CRONOS_ALLOW_SHELL=1" in run.error


async def test_shell_runs_argv_when_allowed(harness: Harness, settings: Settings) -> None:
    ok = await harness.job(kind="shell", payload={"argv": ["sh", "-c", "echo out; echo err >&2", "ignored; rm -rf /"]})
    bad = await harness.job(kind="shell", payload={"argv": ["sh", "-c", "exit 3"]})
    await harness.queue(ok)
    await harness.queue(bad)
    async with Executor(msgspec.structs.replace(settings, allow_shell=True)) as ex:
        await ex.run_once()
    (done,) = await harness.runs(ok)
    assert done.state == "completed" and done.result == "exit 0\nstdout:\nout\n\nstderr:\nerr\n"
    (failed,) = await harness.runs(bad)
    assert (failed.state, failed.error) == ("failed", "exit code 3")


async def test_cancelled_shell_run_kills_its_process_group(
    harness: Harness, settings: Settings, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    job = await harness.job(kind="shell", payload={"argv": ["sh", "-c", script]}, timeout_s=0.5)
    await harness.queue(job)
    async with Executor(msgspec.structs.replace(settings, allow_shell=True)) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert (run.state, run.error) == ("failed", "timed out after 0.5 s")
    grandchild = int(pidfile.read_text())

    async def gone() -> bool:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            return True
        return _zombie(grandchild)

    await wait_for(gone, timeout=5, what="the grandchild `sleep` to be killed")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True
