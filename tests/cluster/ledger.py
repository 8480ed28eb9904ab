"""Reading and seeding a cluster's PostgreSQL: jobs in, the ledger out (for the checker).

Each call opens its own short connection and retries while PostgreSQL is down, because the
tests restart and crash it underneath.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from cronos.store.db import CONNECTION_ERRORS
from tests.cluster.checker import Interval, JobDef, RunRow
from tests.waiting import poll

T = TypeVar("T")

_JOB_COLUMNS = (
    "id, cron_expression, timezone, status, concurrency_policy, max_retries, created_at, kind, misfire_grace_s"
)
_RUN_COLUMNS = (
    "id, job_id, scheduled_for, attempt, trigger, state, due_at, created_at, epoch, node_id,"
    " started_at, finished_at, error, skip_reason"
)

_RUNNING_SPANS = (
    "SELECT run_id, min(at) FILTER (WHERE new_state = 'running') AS began,"
    " min(at) FILTER (WHERE old_state = 'running') AS ended"
    " FROM chaos_transitions GROUP BY run_id HAVING bool_or(new_state = 'running')"
)


@dataclass(frozen=True, slots=True)
class Ledger:
    jobs: list[JobDef]
    runs: list[RunRow]
    leader_log: dict[int, datetime]  # epoch -> elected_at
    running: dict[int, Interval]  # run id -> [entered running, left running), from the audit trigger


async def with_db(dsn: str, work: Callable[[asyncpg.Connection], Awaitable[T]], timeout: float = 30) -> T:
    """Run `work` on a fresh connection, retrying through PostgreSQL restarts for `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
            try:
                return await work(conn)
            finally:
                await conn.close(timeout=2)
        except CONNECTION_ERRORS:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def insert_job(
    dsn: str,
    name: str,
    cron_expression: str,
    *,
    kind: str = "task",
    payload: dict[str, Any] | None = None,
    **policy: Any,
) -> JobDef:
    """Insert a job as the API would (and NOTIFY, so a running leader picks it up at once)."""
    columns = {"name": name, "cron_expression": cron_expression, "kind": kind, "payload": json.dumps(payload or {})}
    columns |= policy
    names = ", ".join(columns)
    params = ", ".join(f"${i}" + ("::jsonb" if key == "payload" else "") for i, key in enumerate(columns, 1))

    async def work(conn: asyncpg.Connection) -> JobDef:
        async with conn.transaction():
            row = await conn.fetchrow(
                f"INSERT INTO jobs ({names}) VALUES ({params}) RETURNING {_JOB_COLUMNS}", *columns.values()
            )
            await conn.execute(
                "SELECT pg_notify('cronos_jobs', $1)", json.dumps({"op": "created", "job_id": row["id"]})
            )
        return JobDef(**dict(row))

    return await with_db(dsn, work)


async def load(dsn: str) -> Ledger:
    async def work(conn: asyncpg.Connection) -> Ledger:
        jobs = [JobDef(**dict(r)) for r in await conn.fetch(f"SELECT {_JOB_COLUMNS} FROM jobs ORDER BY id")]
        runs = [RunRow(**dict(r)) for r in await conn.fetch(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY id")]
        leaders = {r["epoch"]: r["elected_at"] for r in await conn.fetch("SELECT epoch, elected_at FROM leader_log")}
        running: dict[int, Interval] = {}
        for r in await conn.fetch(_RUNNING_SPANS):
            running[r["run_id"]] = (r["began"], r["ended"])
        return Ledger(jobs, runs, leaders, running)

    return await with_db(dsn, work)


async def open_runs(dsn: str, until: datetime, by_tick: bool = False) -> list[RunRow]:
    """Runs due by `until` that are still queued, waiting or running; `by_tick`: first attempts of
    a tick by `until` too. A run woken from waiting is due when woken: a tick of a window can be
    due after its end (a forbid job's catch-up after a failover), and a window is judged by tick."""
    tick = " OR (scheduled_for <= $1 AND attempt = 1)" if by_tick else ""

    async def work(conn: asyncpg.Connection) -> list[RunRow]:
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE finished_at IS NULL AND (due_at <= $1{tick}) ORDER BY id"
        return [RunRow(**dict(r)) for r in await conn.fetch(sql, until)]

    return await with_db(dsn, work)


async def settle(dsn: str, until: datetime, timeout: float) -> list[RunRow]:
    """Wait up to `timeout` s for every run due by `until`, or of a tick by then, to end; returns
    those still open (G4)."""
    remaining: list[RunRow] = []

    async def ended() -> bool:
        nonlocal remaining
        remaining = await open_runs(dsn, until, by_tick=True)
        return not remaining

    await poll(ended, timeout=timeout, interval=0.1)
    return remaining


async def count_runs(dsn: str, where: str = "TRUE", *args: Any) -> int:
    async def work(conn: asyncpg.Connection) -> int:
        return int(await conn.fetchval(f"SELECT count(*) FROM runs WHERE {where}", *args))

    return await with_db(dsn, work)


async def fetch_runs(dsn: str, where: str = "TRUE", *args: Any) -> list[RunRow]:
    async def work(conn: asyncpg.Connection) -> list[RunRow]:
        return [
            RunRow(**dict(r))
            for r in await conn.fetch(f"SELECT {_RUN_COLUMNS} FROM runs WHERE {where} ORDER BY id", *args)
        ]

    return await with_db(dsn, work)


def write_csv(runs: list[RunRow], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [f.name for f in dataclasses.fields(RunRow)]
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(names)
        for run in runs:
            writer.writerow([getattr(run, name) for name in names])
