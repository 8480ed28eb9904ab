"""One expiry rule (issue 38): a run's expiry is stamped once, when it is created
(cronos.lifecycle.expiry, runs.expires_at), and the outbox, the token, the claim and the reaper
all judge it by that instant, whatever its job's grace becomes afterwards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from cronos import lifecycle
from cronos.models import SKIP_EXPIRED
from cronos.store.claims import ClaimedRun
from cronos.store.epoch import EpochStore
from cronos.store.jobs import JobStore
from cronos.store.ledger import Ledger
from cronos.store.runs import RunStore
from tests.integration.test_revisions import EVERY_SECOND
from tests.waiting import wait_for


def _accept(fields: dict[str, Any]) -> None:
    return None


async def _job(jobs: JobStore, name: str, grace_s: float) -> int:
    job, _secret = await jobs.create({**EVERY_SECOND, "name": name, "misfire_grace_s": grace_s, "status": "paused"})
    return job.id


async def _row(pool: asyncpg.Pool, run_id: int) -> Any:
    return await pool.fetchrow(
        "SELECT state, skip_reason, due_at, expires_at, finished_at FROM runs WHERE id = $1", run_id
    )


async def test_a_run_expires_at_the_instant_stamped_when_it_was_created_whatever_its_grace_becomes(
    pg_pool: asyncpg.Pool,
) -> None:
    jobs, runs, ledger = JobStore(pg_pool), RunStore(pg_pool), Ledger(pg_pool)
    epoch = (await EpochStore(pg_pool).take("test-leader")).epoch
    short = await _job(jobs, "short", 4.0)
    run = await jobs.trigger(short)
    row = await _row(pg_pool, run.id)
    assert row["expires_at"] == lifecycle.expiry(row["due_at"], 4.0)
    await jobs.update(short, {"misfire_grace_s": 3600.0}, _accept)  # after the run was created
    # The outbox pushes its token with the instant stamped, not one from the job's grace now.
    (taken,), _misfired = await ledger.take(epoch, datetime.now(UTC))
    assert taken.expires_ms == int(row["expires_at"].timestamp() * 1000)
    assert (await runs.reap(epoch)).expired == 0  # within its stamped 4 s still

    async def expired() -> bool:
        return (await runs.reap(epoch)).expired == 1

    await wait_for(expired, timeout=20, what="the reaper to expire the run at its stamped instant")
    row = await _row(pg_pool, run.id)
    assert (row["state"], row["skip_reason"]) == ("skipped", SKIP_EXPIRED)
    assert row["finished_at"] >= row["expires_at"]  # not before: the 3600 s the job has now never applied


async def test_a_grace_shortened_after_a_run_was_created_does_not_expire_it(pg_pool: asyncpg.Pool) -> None:
    jobs, runs = JobStore(pg_pool), RunStore(pg_pool)
    epoch = (await EpochStore(pg_pool).take("test-leader")).epoch
    long = await _job(jobs, "long", 3600.0)
    run = await jobs.trigger(long)
    await jobs.update(long, {"misfire_grace_s": 0.0}, _accept)
    # As if it was created 10 s ago: the job's grace now (the 1 s floor) would have ended; its own has not.
    await pg_pool.execute("UPDATE runs SET due_at = due_at - interval '10 seconds' WHERE id = $1", run.id)
    assert (await runs.reap(epoch)).expired == 0
    (claimed,) = await runs.claim([run.id], "node-a", 30)
    assert isinstance(claimed, ClaimedRun)
    row = await _row(pg_pool, run.id)
    assert row["state"] == "running" and row["expires_at"] - row["due_at"] == timedelta(seconds=3610)
