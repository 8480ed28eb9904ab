"""Concurrency groups with real processes (issue 25, item 5): a `cronos dispatcher` and two
`cronos executor`s, a group of limit 2 shared by five jobs firing every second. Never more than 2
of their runs run at once (the ledger's started/finished intervals), the waiting runs start in
tick order, and a kill -9 of an executor holding a slot frees it only when the reaper ends its run
as "executor lost" — then the group's next waiting run starts on the other executor."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta

import asyncpg
import pytest

from cronos.models import FAIL_EXECUTOR_LOST
from tests.cluster.test_executor_process import Procs, procs  # noqa: F401  (the fixture)
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster

LIMIT = 2
JOBS = 5
EXECUTOR = ("executor", "--import", "tests.cluster.tasks")


async def add_group_jobs(pool: asyncpg.Pool) -> list[int]:
    """The group and its five every-second jobs (allow: every tick's run asks the group for a slot)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("INSERT INTO concurrency_groups (name, run_limit) VALUES ('warehouse', $1)", LIMIT)
        ids = [
            await conn.fetchval(
                "INSERT INTO jobs (name, cron_expression, payload, concurrency_policy, misfire_grace_s,"
                " concurrency_group, last_scheduled_for) VALUES ($1, '* * * * * *', $2, 'allow', 600,"
                " 'warehouse', now()) RETURNING id",
                f"load-{i}",
                {"action": "sleep", "seconds": 0.8},
            )
            for i in range(JOBS)
        ]
        for job_id in ids:
            await conn.execute("SELECT pg_notify('cronos_jobs', $1)", f'{{"op": "created", "job_id": {job_id}}}')
    return [int(i) for i in ids]


def most_at_once(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals [start, end) open at one instant (an end before a start at the same instant)."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    most = open_ = 0
    for _, step in edges:
        open_ += step
        most = max(most, open_)
    return most


async def test_a_group_limit_holds_across_two_executors_and_a_kill_frees_the_slot_through_the_reaper(
    pg_pool: asyncpg.Pool,
    procs: Procs,  # noqa: F811  (the imported fixture)
) -> None:
    procs.start("leader", "dispatcher")
    nodes = {name: procs.start(name, *EXECUTOR) for name in ("e1", "e2")}
    jobs = await add_group_jobs(pg_pool)

    async def started() -> int:
        return int(await pg_pool.fetchval("SELECT count(*) FROM runs WHERE started_at IS NOT NULL"))

    await wait_for(lambda: _at_least(started, 10), timeout=45, interval=0.2, what="10 runs of the group started")
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE state = 'waiting' AND waiting_for = 'warehouse'")

    # kill -9 an executor while it holds a slot.
    victim = await wait_for(
        lambda: _holding(pg_pool, set(nodes.values())), timeout=20, interval=0.05, what="a run holding a slot"
    )
    killed_node, lost_run = victim
    name = next(n for n, node in nodes.items() if node == killed_node)
    procs.signal(name, signal.SIGKILL)
    killed_at = await pg_pool.fetchval("SELECT clock_timestamp()")
    survivor = next(node for node in nodes.values() if node != killed_node)

    async def reaped_and_next_started() -> bool:
        row = await pg_pool.fetchrow("SELECT state, error, finished_at FROM runs WHERE id = $1", lost_run)
        if row["state"] != "failed":
            return False
        assert row["error"] == FAIL_EXECUTOR_LOST
        after = await pg_pool.fetchval(
            "SELECT count(*) FROM runs WHERE started_at > $1 AND node_id = $2", row["finished_at"], survivor
        )
        return bool(after)

    await wait_for(reaped_and_next_started, timeout=30, interval=0.2, what="the reaper's end of the lost run")

    rows = await pg_pool.fetch(
        "SELECT id, scheduled_for, started_at, coalesce(finished_at, clock_timestamp()) AS ended FROM runs"
        " WHERE job_id = ANY($1::bigint[]) AND started_at IS NOT NULL ORDER BY started_at",
        jobs,
    )
    assert most_at_once([(r["started_at"], r["ended"]) for r in rows]) <= LIMIT
    # Waiting runs start in tick order: before the kill (a token the killed executor held back may
    # start late after it), no run started before a run of an earlier tick, beyond a claim's skew.
    before = [r for r in rows if r["ended"] < killed_at]
    late = [
        (a["id"], b["id"])
        for a in before
        for b in before
        if (a["scheduled_for"], a["id"]) < (b["scheduled_for"], b["id"])
        and a["started_at"] > b["started_at"] + timedelta(seconds=0.25)
    ]
    assert not late, late
    assert len(before) >= 6


async def _at_least(count: object, n: int) -> bool:
    return bool(await count() >= n)  # type: ignore[operator]


async def _holding(pool: asyncpg.Pool, nodes: set[str]) -> tuple[str, int] | None:
    """A running run of the group, on one of `nodes`, just started (so it still runs at the kill)."""
    row = await pool.fetchrow(
        "SELECT r.node_id, r.id FROM concurrency_group_slots s JOIN runs r ON r.id = s.run_id"
        " WHERE r.state = 'running' AND r.finished_at IS NULL AND r.node_id = ANY($1::text[])"
        " AND r.started_at > clock_timestamp() - interval '0.2 seconds' LIMIT 1",
        sorted(nodes),
    )
    return None if row is None else (row["node_id"], row["id"])
