"""A cancel and a finish of the same job, at once, do not deadlock.

A finish ends the running run (its trigger deletes the job's runs_running_exclusive row), then wakes
the run waiting behind it. A cancel of that waiting run used to lock it, then read what runs (waiting
for the finish's row to commit) in the same transaction: the finish's wake then waited for the cancel
and PostgreSQL killed one of them (seen by test_lifecycle_stateful's "cancel races a finish").
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg

from cronos.store.cancels import CancelStore
from cronos.store.queries import runs as runs_q
from cronos.store.runs import ClaimedRun, Refused, RunStore
from tests.integration.ledger_helpers import insert_job, insert_run
from tests.waiting import wait_for


async def test_a_cancel_and_a_finish_of_one_job_at_once_both_complete(pg_pool: asyncpg.Pool) -> None:
    store = RunStore(pg_pool)
    job = await insert_job(pg_pool, concurrency_policy="buffer_all")
    now = datetime.now(UTC).replace(microsecond=0)
    ahead, behind = [await insert_run(pg_pool, job, now - timedelta(seconds=s)) for s in (2, 1)]
    (claimed,) = await store.claim([ahead.run_id], "a", 30)
    assert isinstance(claimed, ClaimedRun)
    assert await store.claim([behind.run_id], "a", 30) == [Refused.WAIT]

    finisher = await pg_pool.acquire()
    try:
        finishing = finisher.transaction()
        await finishing.start()
        # The finish's first step, as FINISH_RUNS writes it: the running run ends, the trigger deletes
        # the job's runs_running_exclusive row (uncommitted).
        await finisher.execute(
            "UPDATE runs SET state = 'completed', finished_at = now(), lease_until = NULL WHERE id = $1",
            ahead.run_id,
        )
        cancelling = asyncio.create_task(CancelStore(pg_pool).cancel(behind.run_id, actor="ops"))

        async def cancel_blocked() -> bool:
            waiting = await pg_pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            return bool(waiting) or cancelling.done()

        await wait_for(cancel_blocked, timeout=10, what="the cancel to wait for the finish")
        # The finish's wake of the run behind: it locks that run. Before the fix the cancel held it.
        await finisher.execute("SET LOCAL lock_timeout = '5s'")
        await finisher.fetch(runs_q.RUNS_WAKE, [behind.run_id])
        await finishing.commit()
    finally:
        await pg_pool.release(finisher)

    done = await asyncio.wait_for(cancelling, timeout=10)
    assert done.ended and done.was == "waiting"
    states = dict(await pg_pool.fetch("SELECT id, state FROM runs WHERE job_id = $1", job))
    assert states == {ahead.run_id: "completed", behind.run_id: "cancelled"}
