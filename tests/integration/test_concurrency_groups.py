"""Concurrency groups in the ledger (issue 25, item 5), against a real PostgreSQL: slots taken at
the claim, waiting for the group, a freed slot waking the group's next run in tick order, the
reaper freeing a lost run's slot, two claims racing for the last slot."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cronos.store import groups
from cronos.store.cancels import CancelStore
from cronos.store.runs import ClaimedRun, Outcome, Refused, RunStore
from tests.integration.ledger_helpers import insert_job, insert_run, set_epoch


@pytest.fixture
def store(pg_pool: asyncpg.Pool) -> RunStore:
    return RunStore(pg_pool)


async def grouped_jobs(pool: asyncpg.Pool, count: int, limit: int, group: str = "warehouse") -> list[int]:
    await pool.execute("INSERT INTO concurrency_groups (name, run_limit) VALUES ($1, $2)", group, limit)
    jobs = [await insert_job(pool) for _ in range(count)]
    await pool.execute("UPDATE jobs SET concurrency_group = $1 WHERE id = ANY($2::bigint[])", group, jobs)
    return jobs


def at(seconds: float) -> datetime:
    return datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=seconds)


async def state_of(pool: asyncpg.Pool, run_id: int) -> tuple[str, str | None]:
    row = await pool.fetchrow("SELECT state, waiting_for FROM runs WHERE id = $1", run_id)
    return row["state"], row["waiting_for"]


async def slots(pool: asyncpg.Pool) -> list[int]:
    return [r["run_id"] for r in await pool.fetch("SELECT run_id FROM concurrency_group_slots ORDER BY run_id")]


def done(run: ClaimedRun | Refused, node: str = "a") -> Outcome:
    assert isinstance(run, ClaimedRun)
    return Outcome(run_id=run.id, node_id=node, state="completed", holds_slot=run.concurrency_group is not None)


async def test_a_full_group_makes_runs_wait_and_a_finish_wakes_the_first_in_tick_order(
    pg_pool: asyncpg.Pool, store: RunStore
) -> None:
    a, b, c, d = await grouped_jobs(pg_pool, 4, limit=2)
    now = at(0)
    runs = [await insert_run(pg_pool, job, now - timedelta(seconds=s)) for job, s in ((a, 4), (b, 3), (c, 1), (d, 2))]
    first = await store.claim([runs[0].run_id, runs[1].run_id], "a", 30)
    assert all(isinstance(r, ClaimedRun) and r.concurrency_group == "warehouse" for r in first)
    # c's tick is later than d's: d is woken first, whatever order the claims came in.
    assert await store.claim([runs[2].run_id], "a", 30) == [Refused.WAIT_GROUP]
    assert await store.claim([runs[3].run_id], "a", 30) == [Refused.WAIT_GROUP]
    assert await state_of(pg_pool, runs[2].run_id) == ("waiting", "warehouse")
    assert await slots(pg_pool) == sorted([runs[0].run_id, runs[1].run_id])

    finished = await store.finish([done(first[0])])
    assert finished.woken == 1
    assert await state_of(pg_pool, runs[3].run_id) == ("queued", "warehouse")  # woken, with the freed slot
    assert await state_of(pg_pool, runs[2].run_id) == ("waiting", "warehouse")
    # The woken run holds its slot: a new run of another tick cannot take it first.
    e = await insert_run(pg_pool, a, now + timedelta(seconds=1))
    assert await store.claim([e.run_id], "b", 30) == [Refused.WAIT_GROUP]
    (woken,) = await store.claim([runs[3].run_id], "b", 30)
    assert isinstance(woken, ClaimedRun) and woken.concurrency_group == "warehouse"
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE state = 'running'") == 2
    # A repeated token of a running holder, or a release asked for it, leaves its slot alone.
    assert await store.claim([runs[3].run_id], "c", 30) == [Refused.NOT_QUEUED]
    async with pg_pool.acquire() as conn, conn.transaction():
        assert await groups.release(conn, [runs[3].run_id]) == []
    assert runs[3].run_id in await slots(pg_pool)


async def test_a_group_limit_holds_when_claims_race_for_the_last_slot(pg_pool: asyncpg.Pool) -> None:
    jobs = await grouped_jobs(pg_pool, 6, limit=1)
    stores = [RunStore(pg_pool) for _ in jobs]
    base = at(-60)
    for round_ in range(8):
        runs = [await insert_run(pg_pool, job, base + timedelta(seconds=round_)) for job in jobs]
        answers = await asyncio.gather(
            *(s.claim([r.run_id], f"node-{i}", 30) for i, (s, r) in enumerate(zip(stores, runs, strict=True)))
        )
        claimed = [a for (a,) in answers if isinstance(a, ClaimedRun)]
        assert len(claimed) == 1, answers
        assert sum(a == Refused.WAIT_GROUP for (a,) in answers) == len(jobs) - 1
        await pg_pool.execute(
            "UPDATE runs SET state = 'skipped', skip_reason = 'test', finished_at = now()"
            " WHERE state IN ('waiting', 'running', 'queued')"
        )
        await pg_pool.execute("DELETE FROM concurrency_group_slots")


async def test_the_reaper_frees_a_lost_runs_slot_for_the_next_waiting_run(
    pg_pool: asyncpg.Pool, store: RunStore
) -> None:
    a, b = await grouped_jobs(pg_pool, 2, limit=1)
    held, behind = await insert_run(pg_pool, a, at(-2)), await insert_run(pg_pool, b, at(-1))
    assert isinstance((await store.claim([held.run_id], "gone", 30))[0], ClaimedRun)
    assert await store.claim([behind.run_id], "b", 30) == [Refused.WAIT_GROUP]
    await pg_pool.execute("UPDATE runs SET lease_until = now() - interval '1 second' WHERE id = $1", held.run_id)
    await set_epoch(pg_pool, 7)
    reaped = await store.reap(7)
    assert reaped.lost == 1
    assert (await state_of(pg_pool, held.run_id))[0] == "failed"
    assert await state_of(pg_pool, behind.run_id) == ("queued", "warehouse")
    assert await slots(pg_pool) == [behind.run_id]


async def test_the_leaders_sweep_frees_the_slot_of_a_run_ended_by_another_path(
    pg_pool: asyncpg.Pool, store: RunStore
) -> None:
    a, b = await grouped_jobs(pg_pool, 2, limit=1)
    held, behind = await insert_run(pg_pool, a, at(-2)), await insert_run(pg_pool, b, at(-1))
    await store.claim([held.run_id], "a", 30)
    assert await store.claim([behind.run_id], "b", 30) == [Refused.WAIT_GROUP]
    # Ended without its finish (as a replace or a cancel would): its slot no longer counts.
    await pg_pool.execute("UPDATE runs SET state = 'failed', finished_at = now() WHERE id = $1", held.run_id)
    await set_epoch(pg_pool, 7)
    swept = await store.sweep_waiters(7)
    assert swept.woken == 1
    assert await state_of(pg_pool, behind.run_id) == ("queued", "warehouse")
    assert await slots(pg_pool) == [behind.run_id]


async def test_a_woken_run_that_does_not_start_hands_its_slot_on(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    a, b, c = await grouped_jobs(pg_pool, 3, limit=1)
    held = await insert_run(pg_pool, a, at(-3))
    late = await insert_run(pg_pool, b, at(-2))
    last = await insert_run(pg_pool, c, at(-1))
    first = await store.claim([held.run_id], "a", 30)
    assert await store.claim([late.run_id, last.run_id], "a", 30) == [Refused.WAIT_GROUP, Refused.WAIT_GROUP]
    # It waited past its grace (its stamped expiry) before the slot came.
    await pg_pool.execute(
        "UPDATE runs SET due_at = now() - interval '5 seconds', expires_at = now() - interval '4 seconds'"
        " WHERE id = $1",
        late.run_id,
    )
    await store.finish([done(first[0])])
    assert (await state_of(pg_pool, late.run_id))[0] == "queued"  # woken, but past its grace now
    assert await store.claim([late.run_id], "a", 30) == [Refused.EXPIRED]
    assert await state_of(pg_pool, last.run_id) == ("queued", "warehouse")
    assert await slots(pg_pool) == [last.run_id]


async def test_a_cancelled_run_frees_its_slot_like_other_ends(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    a, b, c, d = await grouped_jobs(pg_pool, 4, limit=1)
    held, woken, behind, last = [
        await insert_run(pg_pool, job, at(s)) for job, s in ((a, -4), (b, -3), (c, -2), (d, -1))
    ]
    cancels = CancelStore(pg_pool)
    (first,) = await store.claim([held.run_id], "a", 30)
    assert await store.claim([woken.run_id, behind.run_id, last.run_id], "a", 30) == [Refused.WAIT_GROUP] * 3
    # Running, then stopped by its executor (a cancel asked of it): its finish frees the slot.
    assert isinstance(first, ClaimedRun)
    assert not (await cancels.cancel(held.run_id, actor="ops")).ended
    stopped = Outcome(run_id=first.id, node_id="a", state="cancelled", error="cancelled by ops", holds_slot=True)
    assert (await store.finish([stopped])).woken == 1
    assert await state_of(pg_pool, woken.run_id) == ("queued", "warehouse")
    assert await slots(pg_pool) == [woken.run_id]
    # Woken with the slot and cancelled before it started: the slot goes to the next waiter at once.
    assert (await cancels.cancel(woken.run_id, actor="ops")).ended
    assert (await state_of(pg_pool, woken.run_id))[0] == "cancelled"
    assert await state_of(pg_pool, behind.run_id) == ("queued", "warehouse")
    assert await slots(pg_pool) == [behind.run_id]
    # Running, asked to cancel, its executor gone: the reaper ends it cancelled and frees the slot.
    (taken,) = await store.claim([behind.run_id], "gone", 30)
    assert isinstance(taken, ClaimedRun)
    await cancels.cancel(behind.run_id, actor="ops")
    await pg_pool.execute("UPDATE runs SET lease_until = now() - interval '1 second' WHERE id = $1", behind.run_id)
    await set_epoch(pg_pool, 7)
    assert (await store.reap(7)).lost == 1
    assert (await state_of(pg_pool, behind.run_id))[0] == "cancelled"
    assert await state_of(pg_pool, last.run_id) == ("queued", "warehouse")
    assert await slots(pg_pool) == [last.run_id]


async def test_jobs_without_a_group_claim_in_one_statement_as_before(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    await grouped_jobs(pg_pool, 1, limit=1)
    plain = await insert_job(pg_pool)
    run = await insert_run(pg_pool, plain, at(-1))
    (claimed,) = await store.claim([run.run_id], "a", 30)
    assert isinstance(claimed, ClaimedRun) and claimed.concurrency_group is None
    assert store.round_trips == 1
    await store.finish([done(claimed)])
    assert await slots(pg_pool) == []
