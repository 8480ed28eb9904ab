"""Executor OS processes under kill -9, SIGSTOP and SIGTERM (no dispatcher: the test plays
the leader, pushing tokens and calling the fenced reaper itself)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis

import cronos
from cronos.keys import Keys
from cronos.models import FAIL_EXECUTOR_LOST
from cronos.settings import Settings
from cronos.store.runs import RunStore
from cronos.stream import RunStream
from tests.cluster.servers import cronos_command
from tests.integration.ledger_helpers import Harness, push_due_retries, set_epoch
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]


@cronos.task("proc.first_attempt_sleeps", replace=True)
async def first_attempt_sleeps(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
    """Attempt 1 takes `seconds`; a retry finishes at once."""
    if ctx.attempt == 1:
        await asyncio.sleep(float(payload["seconds"]))
    return f"attempt {ctx.attempt}"


class Procs:
    def __init__(self, settings: Settings, logdir: Path) -> None:
        self.settings = settings
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str, **env: str) -> str:
        """Start `cronos executor` (or `cronos *args`) as `name`; its node id."""
        node = f"{self.settings.node_id}-{name}"
        full = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CRONOS_")},
            "DATABASE_URL": self.settings.database_url,
            "REDIS_URL": self.settings.redis_url,
            "CRONOS_KEY_PREFIX": self.settings.key_prefix,
            "CRONOS_NODE_ID": node,
            "CRONOS_RUN_LEASE_S": "1.5",
            "CRONOS_DRAIN_TIMEOUT_S": "5",
            "CRONOS_LOG_FORMAT": "json",
            "PYTHONPATH": str(REPO),
            **env,
        }
        argv = [*cronos_command(), *(args or ("executor", "--import", "tests.cluster.test_executor_process"))]
        with (self.logdir / f"{name}.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(
                argv, env=full, cwd=self.logdir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return node

    def log(self, name: str) -> str:
        return (self.logdir / f"{name}.log").read_text()

    def events(self, name: str, event: str) -> list[dict[str, Any]]:
        """The JSON log lines of `name` whose event is `event`."""
        found = []
        for line in self.log(name).splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("event") == event:
                    found.append(record)
        return found

    def signal(self, name: str, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.procs[name].pid, signum)

    def close(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def procs(settings: Settings, tmp_path: Path) -> Iterator[Procs]:
    found = Procs(settings, tmp_path)
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
async def harness(pg_pool: asyncpg.Pool, redis_client: aioredis.Redis, settings: Settings) -> Harness:
    stream = RunStream(redis_client, Keys(settings.key_prefix))
    await stream.ensure_group()
    await set_epoch(pg_pool, 1)
    return Harness(pg_pool, stream)


async def _running_on(harness: Harness, run_id: int) -> str | None:
    row = await harness.pool.fetchrow("SELECT state, node_id FROM runs WHERE id = $1", run_id)
    return row["node_id"] if row["state"] == "running" else None


async def _reap_until_lost(harness: Harness) -> None:
    store = RunStore(harness.pool)

    async def reaped() -> int:
        return (await store.reap(1)).lost  # what the leader does periodically

    await wait_for(reaped, timeout=10, interval=0.1, what="the reaper to end the lost run")
    assert await push_due_retries(harness.pool, harness.stream)  # and the leader pushes the retry


async def test_kill_9_mid_run_is_reaped_and_retried_elsewhere(harness: Harness, procs: Procs) -> None:
    job = await harness.job(payload={"action": "proc.first_attempt_sleeps", "seconds": 60}, max_retries=1)
    token = await harness.queue(job)
    node_a = procs.start("a")
    assert await wait_for(lambda: _running_on(harness, token.run_id), timeout=15, what="run started") == node_a
    procs.signal("a", signal.SIGKILL)
    node_b = procs.start("b")
    await _reap_until_lost(harness)

    async def retried() -> bool:
        return [r.state for r in await harness.runs(job)] == ["failed", "completed"]

    await wait_for(retried, timeout=15, what="the retry to complete on b")
    first, second = await harness.runs(job)
    assert (first.error, first.node_id) == (FAIL_EXECUTOR_LOST, node_a)
    assert (second.attempt, second.node_id, second.result) == (2, node_b, "attempt 2")


async def test_sigstop_past_the_lease_is_taken_over_and_reports_nothing(harness: Harness, procs: Procs) -> None:
    job = await harness.job(payload={"action": "proc.first_attempt_sleeps", "seconds": 2.5}, max_retries=1)
    token = await harness.queue(job)
    node_a = procs.start("a")
    await wait_for(lambda: _running_on(harness, token.run_id), timeout=15, what="run started")
    procs.signal("a", signal.SIGSTOP)  # frozen past its 1.5 s lease
    node_b = procs.start("b")
    await _reap_until_lost(harness)

    async def retried() -> bool:
        return [r.state for r in await harness.runs(job)] == ["failed", "completed"]

    await wait_for(retried, timeout=15, what="the retry to complete on b")
    procs.signal("b", signal.SIGKILL)  # from now on only a takes tokens
    procs.signal("a", signal.SIGCONT)
    await wait_for(lambda: _aval("run.lost" in procs.log("a")), timeout=10, what="a to notice it lost the run")
    # A later run through a: its lost attempt (cancelled as it woke) had its chance to write first.
    later = await harness.queue(await harness.job(payload={"action": "noop"}))

    async def a_ran_it() -> bool:
        row = await harness.pool.fetchrow("SELECT state, node_id FROM runs WHERE id = $1", later.run_id)
        return (row["state"], row["node_id"]) == ("completed", node_a)

    await wait_for(a_ran_it, timeout=10, what="a to run a later token")
    first, second = await harness.runs(job)
    assert (first.state, first.error, first.node_id) == ("failed", FAIL_EXECUTOR_LOST, node_a)
    assert (second.state, second.node_id) == ("completed", node_b)
    completed_on_a = procs.events("a", "run.completed")
    assert [r.get("run_id") for r in completed_on_a] == [later.run_id]  # not the lost one


async def test_sigterm_drains_then_exits_zero(harness: Harness, procs: Procs) -> None:
    short = await harness.job(payload={"action": "sleep", "seconds": 1})
    long = await harness.job(payload={"action": "sleep", "seconds": 60})
    short_run = await harness.queue(short)
    long_run = await harness.queue(long)
    procs.start("a", CRONOS_DRAIN_TIMEOUT_S="2")
    for run in (short_run, long_run):
        await wait_for(lambda r=run: _running_on(harness, r.run_id), timeout=15, what="runs started")  # type: ignore[misc]
    procs.signal("a", signal.SIGTERM)
    code = await asyncio.to_thread(procs.procs["a"].wait, 15)
    assert code == 0
    assert [r.state for r in await harness.runs(short)] == ["completed"]
    (cancelled,) = await harness.runs(long)
    assert (cancelled.state, cancelled.error) == ("failed", "cancelled: executor shutting down")
    assert (await harness.stream.info()).pending == 0


async def _aval(value: bool) -> bool:
    return value
