"""The breaker's fenced trip over a real ledger (cronos.store.breaker): the health evaluator counts
the failures, the breaker pauses, once, by the `dispatcher`, and a job resumed by hand counts afresh."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

from api.schemas import JobCreate
from cronos.breaker import parse_defaults
from cronos.errors import NotLeader
from cronos.store.breaker import tend_held, trip_due
from cronos.store.epoch import EpochStore
from cronos.store.jobs import JobStore
from tests.integration.test_health import create, evaluator, run


@pytest.fixture
async def epoch(pg_pool: asyncpg.Pool) -> int:
    await pg_pool.execute("UPDATE health_scan SET scanned_to = now() - interval '1 hour'")
    return (await EpochStore(pg_pool).take("breaker-test")).epoch


async def fail(pool: asyncpg.Pool, epoch: int, job_id: int, times: int) -> None:
    for _ in range(times):
        await run(pool, job_id, "failed", error="boom")
    await evaluator(pool, epoch).once()


async def trip(pool: asyncpg.Pool, epoch: int, *, after: int = 0, limit: int = 100) -> list[int]:
    paused, _more = await trip_due(pool, epoch, 3, datetime.now(UTC), after=after, limit=limit)
    return [job.id for job in paused]


async def test_three_failures_in_a_row_pause_the_job_once_with_its_reason(pg_pool: asyncpg.Pool, epoch: int) -> None:
    job = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, job, 2)
    assert await trip(pg_pool, epoch) == []  # 2 of 3
    await fail(pg_pool, epoch, job, 1)
    with pytest.raises(NotLeader):
        await trip(pg_pool, epoch - 1)  # a deposed leader writes nothing
    assert await trip(pg_pool, epoch) == [job]
    assert await trip(pg_pool, epoch) == []  # paused already
    row = await pg_pool.fetchrow("SELECT status, pause_note, revision FROM jobs WHERE id = $1", job)
    assert row["status"] == "paused" and "after 3 failed runs in a row" in row["pause_note"]
    revision = await pg_pool.fetchrow("SELECT * FROM job_revisions WHERE job_id = $1 ORDER BY number DESC", job)
    assert (revision["kind"], revision["actor"], revision["number"]) == ("paused", "dispatcher", row["revision"])
    audit = await pg_pool.fetchrow("SELECT * FROM audit_log WHERE job_id = $1 ORDER BY id DESC", job)
    assert (audit["action"], audit["actor"]) == ("paused", "dispatcher")
    kinds = await pg_pool.fetch("SELECT kind, detail FROM job_events WHERE job_id = $1 ORDER BY id", job)
    assert kinds[-1]["kind"] == "paused_by_breaker" and kinds[-1]["detail"]["consecutive_failures"] == 3


async def test_a_job_resumed_by_hand_pauses_again_only_after_k_more_failures(pg_pool: asyncpg.Pool, epoch: int) -> None:
    job = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, job, 3)
    assert await trip(pg_pool, epoch) == [job]
    await JobStore(pg_pool).set_status(job, "active")
    await fail(pg_pool, epoch, job, 2)  # 5 in a row, 2 since the trip
    assert await trip(pg_pool, epoch) == []
    await fail(pg_pool, epoch, job, 1)
    assert await trip(pg_pool, epoch) == [job]


async def test_jobs_counted_but_not_tripped_do_not_hold_back_the_next_page(pg_pool: asyncpg.Pool, epoch: int) -> None:
    resumed = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, resumed, 3)
    assert await trip(pg_pool, epoch) == [resumed]
    await JobStore(pg_pool).set_status(resumed, "active")
    other = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, other, 3)
    paused, more = await trip_due(pg_pool, epoch, 3, datetime.now(UTC), limit=1)
    assert paused == [] and more == resumed  # a full page: read on
    assert await trip(pg_pool, epoch, after=resumed, limit=1) == [other]


# --- a job's own breaker, its canary and its resume ------------------------------------------------

OWN = {"breaker": {"failures": 2, "canary_every": 3}}
_own = itertools.count()


async def create_own(pool: asyncpg.Pool, expectations: dict[str, Any], cron: str = "* * * * * *") -> int:
    """A job through the API's body, with its own breaker (`expectations`), that fails for good."""
    body = {"name": f"own-{next(_own)}", "cron_expression": cron, "payload": {"action": "noop"},
            "max_retries": 0, "expectations": expectations}  # fmt: skip
    job, _secret = await JobStore(pool).create(msgspec.structs.asdict(msgspec.convert(body, JobCreate)))
    return job.id


async def tend(pool: asyncpg.Pool, epoch: int, now: datetime) -> list[tuple[int, str]]:
    taken, _more = await tend_held(pool, epoch, now)
    return [(job.id, step) for job, step in taken]


async def end_canary(pool: asyncpg.Pool, job: int, state: str) -> int:
    run_id: int = await pool.fetchval(
        "UPDATE runs SET state = $2, started_at = now(), finished_at = now() WHERE job_id = $1 AND state = 'queued' "
        "RETURNING id",
        job, state,
    )  # fmt: skip
    return run_id


async def test_a_job_s_own_breaker_lets_a_canary_through_every_m_ticks_and_resumes_after_one_succeeds(
    pg_pool: asyncpg.Pool, epoch: int
) -> None:
    job = await create_own(pg_pool, OWN)
    await fail(pg_pool, epoch, job, 2)
    now = datetime.now(UTC)
    paused, _more = await trip_due(pg_pool, epoch, 0, now)  # the cluster's default is off: the job's own 2
    assert [j.id for j in paused] == [job]
    assert paused[0].pause_note == (
        "paused by the circuit breaker after 2 failed runs in a row (threshold 2); "
        "a canary run every 3 ticks resumes it when one succeeds"
    )
    assert await tend(pg_pool, epoch, now + timedelta(seconds=2)) == []  # 2 ticks of 3
    assert await tend(pg_pool, epoch, now + timedelta(seconds=3)) == [(job, "canary")]
    assert await tend(pg_pool, epoch, now + timedelta(seconds=9)) == []  # the canary is in flight
    first = await end_canary(pg_pool, job, "failed")
    assert await tend(pg_pool, epoch, now + timedelta(seconds=9)) == [(job, "rearm")]
    assert await tend(pg_pool, epoch, now + timedelta(seconds=5)) == []  # 3 ticks after the canary's: not yet
    assert await tend(pg_pool, epoch, now + timedelta(seconds=6)) == [(job, "canary")]
    second = await end_canary(pg_pool, job, "completed")
    assert await tend(pg_pool, epoch, now + timedelta(seconds=7)) == []  # the evaluator has not counted it yet
    await evaluator(pg_pool, epoch).once()
    assert await tend(pg_pool, epoch, now + timedelta(seconds=7)) == [(job, "resume")]
    assert await trip(pg_pool, epoch) == []  # the streak the evaluator keeps starts afresh
    assert await tend(pg_pool, epoch, now + timedelta(seconds=60)) == []  # let go

    row = await pg_pool.fetchrow("SELECT status, pause_note FROM jobs WHERE id = $1", job)
    assert (row["status"], row["pause_note"]) == ("active", None)
    canaries = await pg_pool.fetch(
        "SELECT id, trigger, revision FROM runs WHERE id = ANY($1) ORDER BY id", [first, second]
    )
    assert [r["trigger"] for r in canaries] == ["manual", "manual"]
    revisions = await pg_pool.fetch(
        "SELECT number, kind, actor, status, changes FROM job_revisions WHERE job_id = $1 AND number > 1 "
        "ORDER BY number",
        job,
    )  # fmt: skip
    assert [(r["kind"], r["actor"], r["status"]) for r in revisions] == [
        ("paused", "dispatcher", "paused"), ("paused", "dispatcher", "paused"), ("paused", "dispatcher", "paused"),
        ("resumed", "dispatcher", "active"),
    ]  # fmt: skip
    assert "a canary run let through for the tick at" in revisions[1]["changes"]["pause_note"]
    assert [r["revision"] for r in canaries] == [revisions[1]["number"], revisions[2]["number"]]
    audit = await pg_pool.fetch(
        "SELECT action, actor, detail FROM audit_log WHERE job_id = $1 AND actor = 'dispatcher' ORDER BY id", job
    )
    assert [a["action"] for a in audit] == ["paused", "triggered", "triggered", "resumed"]
    assert audit[-1]["detail"]["breaker"]["run_id"] == second
    kinds = await pg_pool.fetch(
        "SELECT kind, run_id FROM job_events WHERE job_id = $1 AND kind LIKE '%by_breaker' ORDER BY id", job
    )
    assert [(k["kind"], k["run_id"]) for k in kinds] == [
        ("paused_by_breaker", None), ("canary_by_breaker", first), ("canary_by_breaker", second),
        ("resumed_by_breaker", second),
    ]  # fmt: skip


async def test_a_job_paused_or_resumed_by_hand_is_let_go_and_its_own_zero_turns_the_breaker_off(
    pg_pool: asyncpg.Pool, epoch: int
) -> None:
    held = await create_own(pg_pool, OWN)
    off = await create_own(pg_pool, {"breaker": {"failures": 0}})
    await fail(pg_pool, epoch, held, 2)
    await fail(pg_pool, epoch, off, 3)
    now = datetime.now(UTC)
    paused, _more = await trip_due(pg_pool, epoch, 3, now)
    assert [j.id for j in paused] == [held]  # `off` failed 3 times, the default's 3, but its own 0 wins
    await JobStore(pg_pool).set_status(held, "paused", note="looking into it")  # by hand: a new revision
    assert await tend(pg_pool, epoch, now + timedelta(seconds=30)) == []
    assert await pg_pool.fetchval("SELECT held_revision FROM job_breakers WHERE job_id = $1", held) is None
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1 AND trigger = 'manual'", held) == 0


async def test_a_job_held_by_a_change_in_flight_is_left_for_the_next_pass(pg_pool: asyncpg.Pool, epoch: int) -> None:
    job = await create(pg_pool, max_retries=0)
    await fail(pg_pool, epoch, job, 3)
    async with pg_pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT id FROM jobs WHERE id = $1 FOR UPDATE", job)  # an edit by hand, not yet committed
        assert await trip(pg_pool, epoch) == []
    assert await trip(pg_pool, epoch) == [job]


# --- a queue's default breaker (CRONOS_BREAKER_DEFAULTS) -------------------------------------------


async def test_a_queues_default_breaker_trips_its_jobs_and_a_jobs_own_wins(pg_pool: asyncpg.Pool, epoch: int) -> None:
    queues = parse_defaults("etl=2:4")
    in_etl = await create(pg_pool, max_retries=0, queue="etl")
    elsewhere = await create(pg_pool, max_retries=0)
    own = await create_own(pg_pool, {"breaker": {"failures": 3}})
    await pg_pool.execute("UPDATE jobs SET queue = 'etl' WHERE id = $1", own)
    for job in (in_etl, elsewhere, own):
        await fail(pg_pool, epoch, job, 2)
    paused, _more = await trip_due(pg_pool, epoch, 0, datetime.now(UTC), queues=queues)
    assert [j.id for j in paused] == [in_etl]  # the cluster's default is off; the job's own 3 wins over etl's 2
    assert paused[0].pause_note == (
        "paused by the circuit breaker after 2 failed runs in a row (threshold 2); "
        "a canary run every 4 ticks resumes it when one succeeds"
    )
    await fail(pg_pool, epoch, own, 1)
    paused, _more = await trip_due(pg_pool, epoch, 0, datetime.now(UTC), queues=queues)
    assert [j.id for j in paused] == [own]
    assert "canary run every 4 ticks" in str(paused[0].pause_note)  # its own leaves canary_every to etl's
