"""cronos.store.revisions against real PostgreSQL: revisions written with each change, the hand-over
of ticks written ahead, and the leader's tick write refusing a schedule the job no longer has."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from cronos import lifecycle
from cronos.settings import Settings
from cronos.store.db import PageBounds
from cronos.store.epoch import EpochStore
from cronos.store.jobs import JobStore
from cronos.store.ledger import Ledger
from cronos.store.queries.notifications import JOBS_CHANNEL
from cronos.store.revisions import RevisionStore
from cronos.store.runs import ClaimedRun, Outcome, RunStore
from tests.waiting import wait_for

EVERY_SECOND: dict[str, Any] = {
    "name": "every-second",
    "cron_expression": "* * * * * *",
    "timezone": "UTC",
    "kind": "task",
    "payload": {"action": "noop", "password": "hunter2"},
    "timeout_s": 30.0,
    "max_retries": 0,
    "retry_backoff_s": 1.0,
    "concurrency_policy": "forbid",
    "misfire_policy": "run_once",
    "misfire_grace_s": 60.0,
    "jitter_s": 0.0,
    "status": "active",
    "parents": [],
    "queue": "default",
    "labels": {},  # not nullable, like parents: a creation records it
}  # and the namespace it was made in, which the store fills in (default)

_DEFAULTS = Settings()
BOUNDS = PageBounds(_DEFAULTS.history_page_max_bytes, _DEFAULTS.history_value_max_bytes)


def _accept(fields: dict[str, Any]) -> None:
    return None


def _whole_seconds_ahead(n: int) -> list[datetime]:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    return [start + timedelta(seconds=i) for i in range(n)]


async def _write_ahead(pool: asyncpg.Pool, job_id: int, ticks: list[datetime], revision: int = 1) -> None:
    """Ticks as the leader writes them ahead: queued, pushed, with the revision that planned them."""
    await pool.executemany(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, pushed_epoch, revision)"
        " VALUES ($1, $2, 1, 'schedule', 'queued', $2, 1, $3)",
        [(job_id, t, revision) for t in ticks],
    )


async def _ahead(pool: asyncpg.Pool, job_id: int) -> dict[datetime, tuple[str, str | None]]:
    rows = await pool.fetch("SELECT scheduled_for, state, skip_reason FROM runs WHERE job_id = $1", job_id)
    return {r["scheduled_for"]: (r["state"], r["skip_reason"]) for r in rows}


async def test_each_change_is_a_numbered_revision_with_its_actor_and_redacted_values(pg_pool: asyncpg.Pool) -> None:
    jobs = JobStore(pg_pool)
    job, _secret = await jobs.create(EVERY_SECOND, actor="ops")
    assert job.revision == 1
    await jobs.update(job.id, {"payload": {"action": "noop", "password": "s3cret"}}, _accept, actor="ci")
    await jobs.set_status(job.id, "paused", actor="ops")
    await jobs.update(job.id, {"cron_expression": "*/5 * * * * *", "timeout_s": 5.0}, _accept, actor="ci")
    await jobs.set_status(job.id, None, actor="ops")  # toggle: resumes
    await jobs.delete(job.id, actor="ops")

    found = list(reversed((await RevisionStore(pg_pool).of_job(job.id, None, 50, BOUNDS))[0]))
    assert [(r.number, r.kind, r.actor, r.status) for r in found] == [
        (1, "created", "ops", "active"),
        (2, "updated", "ci", "active"),
        (3, "paused", "ops", "paused"),
        (4, "updated", "ci", "paused"),
        (5, "resumed", "ops", "active"),
        (6, "deleted", "ops", "deleted"),
    ]
    assert found[0].fields == sorted([*EVERY_SECOND, "namespace"]) and found[0].changes["payload"]["password"] == "***"
    assert found[1].fields == ["payload"] and found[1].changes == {"payload": {"action": "noop", "password": "***"}}
    assert found[3].changes == {"cron_expression": "*/5 * * * * *", "timeout_s": 5.0}
    assert found[5].fields == [] and found[5].changes == {}
    assert all(a.at <= b.at for a, b in itertools.pairwise(found))
    assert "hunter2" not in str(found) and "s3cret" not in str(found)
    # A deleted job keeps its revisions; a page is newest first and goes on from its last number.
    page, _cut = await RevisionStore(pg_pool).of_job(job.id, 4, 2, BOUNDS)
    assert [r.number for r in page] == [3, 2]


async def test_a_change_that_changes_nothing_writes_nothing_and_notifies_no_one(pg_pool: asyncpg.Pool) -> None:
    jobs = JobStore(pg_pool)
    job, _secret = await jobs.create(EVERY_SECOND)
    heard: asyncio.Queue[str] = asyncio.Queue()

    def hear(*args: Any) -> None:
        heard.put_nowait(args[3])

    async with pg_pool.acquire() as listener:
        await listener.add_listener(JOBS_CHANNEL, hear)
        try:
            same = await jobs.update(job.id, {"timezone": "UTC", "payload": dict(EVERY_SECOND["payload"])}, _accept)
            assert await jobs.update(job.id, {}, _accept) == same == job
            assert await jobs.set_status(job.id, "active") == job  # already active
            await jobs.update(job.id, {"max_retries": 2}, _accept)  # a real change, notified after the no-ops
            # Notifications arrive in commit order: the first one heard is the real change's.
            assert '"updated"' in await asyncio.wait_for(heard.get(), timeout=10)
            assert heard.empty()
        finally:
            await listener.remove_listener(JOBS_CHANNEL, hear)
    after = await jobs.get(job.id)
    assert (after.revision, after.max_retries) == (2, 2) and after.updated_at > job.updated_at
    assert len((await RevisionStore(pg_pool).of_job(job.id, None, 50, BOUNDS))[0]) == 2
    audited = await pg_pool.fetchval("SELECT count(*) FROM audit_log WHERE job_id = $1", job.id)
    assert audited == 2  # created, updated: the no-ops left no entry


async def test_a_schedule_change_skips_the_ticks_written_ahead_that_the_new_schedule_lacks(
    pg_pool: asyncpg.Pool,
) -> None:
    jobs = JobStore(pg_pool)
    job, _secret = await jobs.create(EVERY_SECOND)
    ticks = _whole_seconds_ahead(10)
    await _write_ahead(pg_pool, job.id, ticks)
    before = datetime.now(UTC)
    changed = await jobs.update(job.id, {"cron_expression": "*/5 * * * * *"}, _accept)
    assert changed.revision == 2
    states = await _ahead(pg_pool, job.id)
    for tick in ticks:
        expected = ("queued", None) if tick.second % 5 == 0 else ("skipped", "schedule changed")
        assert states[tick] == expected, tick
    # The new schedule is planned from the change instant, behind the ticks written ahead.
    row = await pg_pool.fetchrow("SELECT last_scheduled_for, plan_revision FROM jobs WHERE id = $1", job.id)
    assert before - timedelta(seconds=1) <= row["last_scheduled_for"] < ticks[0] and row["plan_revision"] == 2


async def test_a_time_zone_change_keeps_only_the_instants_the_new_zone_fires_at(pg_pool: asyncpg.Pool) -> None:
    jobs = JobStore(pg_pool)
    job, _secret = await jobs.create({**EVERY_SECOND, "cron_expression": "0 0 * * * *"})
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    on_the_hour = [hour + timedelta(hours=h) for h in (1, 2)]
    half_past = [t + timedelta(minutes=30) for t in on_the_hour]
    await _write_ahead(pg_pool, job.id, on_the_hour + half_past)
    await jobs.update(job.id, {"timezone": "Asia/Kolkata"}, _accept)  # UTC+05:30: on the half hour
    states = await _ahead(pg_pool, job.id)
    assert all(states[t] == ("skipped", "schedule changed") for t in on_the_hour)
    assert all(states[t] == ("queued", None) for t in half_past)


async def test_a_pause_skips_every_tick_written_ahead_and_other_changes_skip_none(pg_pool: asyncpg.Pool) -> None:
    jobs = JobStore(pg_pool)
    job, _secret = await jobs.create(EVERY_SECOND)
    ticks = _whole_seconds_ahead(3)
    await _write_ahead(pg_pool, job.id, ticks)
    await jobs.update(job.id, {"payload": {"action": "other"}, "jitter_s": 0.5, "name": "renamed"}, _accept)
    assert set((await _ahead(pg_pool, job.id)).values()) == {("queued", None)}
    past = datetime.now(UTC) - timedelta(seconds=1)  # due, not claimed yet: it belongs to the time before
    await _write_ahead(pg_pool, job.id, [past])
    await jobs.update(job.id, {"status": "paused"}, _accept)
    states = await _ahead(pg_pool, job.id)
    assert all(states[t] == ("skipped", "job paused or deleted") for t in ticks)
    assert states[past] == ("queued", None)


async def test_the_leader_cannot_write_ticks_planned_under_an_older_schedule(pg_pool: asyncpg.Pool) -> None:
    jobs = JobStore(pg_pool)
    job, _secret = await jobs.create(EVERY_SECOND)
    epoch = (await EpochStore(pg_pool).take("test-leader")).epoch
    ledger = Ledger(pg_pool)
    ticks = _whole_seconds_ahead(2)
    await jobs.update(job.id, {"cron_expression": "*/2 * * * * *"}, _accept)  # revision 2
    expires = [lifecycle.expiry(t, job.misfire_grace_s) for t in ticks]
    stale = await ledger.write_ticks(epoch, [job.id] * 2, ticks, ticks, [None, None], [1, 1], expires_at=expires)
    assert stale.queued == [] and await _ahead(pg_pool, job.id) == {}
    await jobs.update(job.id, {"max_retries": 1}, _accept)  # revision 3, same schedule
    current = await ledger.write_ticks(epoch, [job.id], ticks[:1], ticks[:1], [None], [2], expires_at=expires[:1])
    assert [r.job_id for r in current.queued] == [job.id]
    rows = await pg_pool.fetch("SELECT revision FROM runs WHERE job_id = $1", job.id)
    assert [r["revision"] for r in rows] == [2]
    (spec,) = await ledger.jobs([job.id])
    assert (spec.revision, spec.plan_revision) == (3, 2)


async def test_runs_record_their_revision_and_a_retry_keeps_its_ticks(pg_pool: asyncpg.Pool) -> None:
    jobs = JobStore(pg_pool)
    job, _secret = await jobs.create(EVERY_SECOND)
    await jobs.update(job.id, {"max_retries": 3}, _accept)
    manual = await jobs.trigger(job.id)
    assert manual.revision == 2
    (claimed,) = await RunStore(pg_pool).claim([manual.id], "n", 30.0)
    assert isinstance(claimed, ClaimedRun)
    await jobs.update(job.id, {"max_retries": 4}, _accept)  # revision 3: the retry is still revision 2's tick
    await RunStore(pg_pool).finish([Outcome(run_id=manual.id, node_id="n", state="failed", retry_delay_s=60.0)])
    retry = await pg_pool.fetchrow(
        "SELECT trigger, attempt, revision FROM runs WHERE job_id = $1 AND attempt = 2", job.id
    )
    assert retry is not None and dict(retry) == {"trigger": "retry", "attempt": 2, "revision": 2}


@pytest.mark.parametrize("route", ["patch", "pause"])
async def test_a_change_that_deadlocks_with_a_run_write_is_run_again(pg_pool: asyncpg.Pool, route: str) -> None:
    """A pause locks the job's row, then its ticks written ahead; a writer holding one of those
    ticks that then asks for the job's row closes a cycle. PostgreSQL rolls the pause back (it
    waited first, so its deadlock check fires first): the store runs it again rather than answer
    503 (seen in CI: a PATCH's 503 in test_notify_end_to_end)."""
    jobs = JobStore(pg_pool)
    job, _secret = await jobs.create(EVERY_SECOND)
    tick = _whole_seconds_ahead(1)[0] + timedelta(minutes=5)
    await _write_ahead(pg_pool, job.id, [tick])
    async with pg_pool.acquire() as writer:
        tx = writer.transaction()
        await tx.start()
        await writer.execute("SELECT 1 FROM runs WHERE job_id = $1 FOR NO KEY UPDATE", job.id)
        paused_by = {"patch": lambda: jobs.update(job.id, {"status": "paused"}, _accept),
                     "pause": lambda: jobs.set_status(job.id, "paused")}  # fmt: skip
        change = paused_by[route]()
        pause = asyncio.create_task(change)

        async def pause_waits() -> bool:
            return bool(await pg_pool.fetchval(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'"
            ))  # fmt: skip

        await wait_for(pause_waits, timeout=10, what="the pause waiting for the locked tick")
        await writer.execute("SELECT 1 FROM jobs WHERE id = $1 FOR NO KEY UPDATE", job.id)  # the cycle
        await tx.commit()
    paused = await asyncio.wait_for(pause, timeout=20)
    assert paused.status == "paused"
    assert (await _ahead(pg_pool, job.id))[tick][0] == "skipped"  # handed over by the pause, run again
