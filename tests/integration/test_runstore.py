"""RunStore against a real PostgreSQL: claims, policies, conditional finish, retries, reaper."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cronos.errors import NotLeader
from cronos.lifecycle import claims_at_once
from cronos.messages import RunToken
from cronos.models import FAIL_EXECUTOR_LOST, FAIL_REPLACED, SKIP_BUFFER_FULL, SKIP_EXPIRED, SKIP_OVERLAP
from cronos.store import claims
from cronos.store.cancels import CancelStore
from cronos.store.db import retry_contention, translate_errors
from cronos.store.queries import runs as runs_q
from cronos.store.runs import Claim, ClaimedRun, Outcome, Refused, RunStore
from tests.integration.ledger_helpers import insert_job, insert_run, run_state, runs_of, set_epoch, tick


def _claimed(answers: list[Claim]) -> list[ClaimedRun]:
    return [a for a in answers if isinstance(a, ClaimedRun)]


@pytest.fixture
def store(pg_pool: asyncpg.Pool) -> RunStore:
    return RunStore(pg_pool)


async def test_batch_claim_takes_queued_runs_once(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    jobs = [await insert_job(pg_pool) for _ in range(3)]
    tokens = [await insert_run(pg_pool, j, tick(0)) for j in jobs]
    ids = [t.run_id for t in tokens]
    first = await store.claim(ids, "node-a", 10)
    second = await store.claim(ids, "node-b", 10)
    assert [c.id for c in _claimed(first)] == ids  # one answer per id, in order
    assert second == [Refused.NOT_QUEUED] * 3
    assert store.round_trips == 3  # one statement claims the batch; the repeat: that one, then the facts
    row = await pg_pool.fetchrow("SELECT node_id, started_at, lease_until FROM runs WHERE id = $1", ids[0])
    assert row["node_id"] == "node-a" and row["lease_until"] > row["started_at"]
    assert _claimed(first)[0].payload == {"action": "noop"} and _claimed(first)[0].kind == "task"


async def test_a_repeated_id_gets_the_run_once(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    token = await insert_run(pg_pool, await insert_job(pg_pool), tick(0))
    first, again = await store.claim([token.run_id, token.run_id], "n", 10)
    assert isinstance(first, ClaimedRun) and again is Refused.NOT_QUEUED


async def test_concurrent_claims_of_one_run_yield_one_owner(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool)
    token = await insert_run(pg_pool, job, tick(0))
    results = await asyncio.gather(*(store.claim([token.run_id], f"node-{i}", 10) for i in range(5)))
    assert sum(len(_claimed(r)) for r in results) == 1


async def _started(pool: asyncpg.Pool, run_id: int, seconds_ago: float) -> None:
    """Backdate a running run's start (it was claimed `seconds_ago`, when its tick was due)."""
    await pool.execute(
        "UPDATE runs SET started_at = now() - make_interval(secs => $2) WHERE id = $1", run_id, seconds_ago
    )


async def test_forbid_waits_for_its_predecessor_until_it_is_late_then_skips(
    pg_pool: asyncpg.Pool, store: RunStore
) -> None:
    # The predecessor started on time 3 s ago and still runs. A tick due now may wait for it (it may
    # end within ON_TIME_S); a tick due 2 s ago would have waited past that: a real overlap.
    job = await insert_job(pg_pool)
    now = datetime.now(UTC)
    old = await insert_run(pg_pool, job, now - timedelta(seconds=3), due_at=now - timedelta(seconds=3))
    late = await insert_run(pg_pool, job, now - timedelta(seconds=2), due_at=now - timedelta(seconds=2))
    new = await insert_run(pg_pool, job, now, due_at=now)
    assert len(_claimed(await store.claim([old.run_id], "a", 10))) == 1
    await _started(pg_pool, old.run_id, 3)
    assert await store.claim([late.run_id], "b", 10) == [Refused.OVERLAP]
    assert await store.claim([new.run_id], "b", 10) == [Refused.WAIT]
    runs = await runs_of(pg_pool, job)
    assert [(r.state, r.skip_reason) for r in runs] == [
        ("running", None),
        ("skipped", SKIP_OVERLAP),
        ("waiting", None),
    ]


async def test_forbid_two_ticks_of_one_job_in_one_batch(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool)
    other = await insert_job(pg_pool)
    a, b = await insert_run(pg_pool, job, tick(0)), await insert_run(pg_pool, job, tick(1))
    c = await insert_run(pg_pool, other, tick(0))
    result = await store.claim([b.run_id, a.run_id, c.run_id], "n", 10)
    assert result[0] is Refused.WAIT  # the older tick runs, the other waits for it
    assert [r.id for r in _claimed(result)] == [a.run_id, c.run_id]


async def test_forbid_orders_a_catch_up_instead_of_skipping_it(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    # Two ticks both overdue (a failover's catch-up), claimed in one batch: the second waits
    # for the first instead of being skipped, since the first started late, and the first's end wakes it.
    job = await insert_job(pg_pool)
    now = datetime.now(UTC)
    a = await insert_run(pg_pool, job, now - timedelta(seconds=4))
    b = await insert_run(pg_pool, job, now - timedelta(seconds=3))
    first, second = await store.claim([a.run_id, b.run_id], "n", 10)
    assert isinstance(first, ClaimedRun) and second is Refused.WAIT
    assert await run_state(pg_pool, b.run_id) == "waiting"
    assert await store.claim([b.run_id], "n", 10) == [Refused.NOT_QUEUED]  # a repeated token changes nothing
    done = await store.finish([Outcome(run_id=a.run_id, node_id="n", state="completed")])
    assert done.woken == 1 and await run_state(pg_pool, b.run_id) == "queued"
    (again,) = await store.claim([b.run_id], "n", 10)
    assert isinstance(again, ClaimedRun)


async def test_buffer_all_waits_for_the_running_predecessor(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool, concurrency_policy="buffer_all")
    runs = [await insert_run(pg_pool, job, tick(n)) for n in range(3)]
    assert isinstance((await store.claim([runs[0].run_id], "a", 10))[0], ClaimedRun)
    assert await store.claim([runs[1].run_id, runs[2].run_id], "b", 10) == [Refused.WAIT, Refused.WAIT]
    assert [r.state for r in await runs_of(pg_pool, job)] == ["running", "waiting", "waiting"]
    # Each end wakes the next waiting run, in tick order.
    await store.finish([Outcome(run_id=runs[0].run_id, node_id="a", state="completed")])
    assert [r.state for r in await runs_of(pg_pool, job)] == ["completed", "queued", "waiting"]


async def test_buffer_one_keeps_one_waiting_run_and_skips_the_rest(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool, concurrency_policy="buffer_one")
    due = datetime.now(UTC) - timedelta(seconds=1)
    runs = [await insert_run(pg_pool, job, tick(n), due_at=due) for n in range(3)]
    assert isinstance((await store.claim([runs[0].run_id], "a", 10))[0], ClaimedRun)
    assert await store.claim([runs[1].run_id], "b", 10) == [Refused.WAIT]
    assert await store.claim([runs[2].run_id], "b", 10) == [Refused.BUFFER_FULL]
    rows = await runs_of(pg_pool, job)
    assert [(r.state, r.skip_reason) for r in rows] == [
        ("running", None),
        ("waiting", None),
        ("skipped", SKIP_BUFFER_FULL),
    ]
    await store.finish([Outcome(run_id=runs[0].run_id, node_id="a", state="completed")])
    assert isinstance((await store.claim([runs[1].run_id], "b", 10))[0], ClaimedRun)


async def test_a_claim_stamps_exclusive_from_its_jobs_policy_now(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    forbid, allow = await insert_job(pg_pool), await insert_job(pg_pool, concurrency_policy="allow")
    a, b = await insert_run(pg_pool, forbid, tick(0)), await insert_run(pg_pool, allow, tick(0))
    await pg_pool.execute("UPDATE runs SET exclusive = NOT exclusive")  # what an insert wrote does not matter
    claimed = {c.job_id: c.exclusive for c in _claimed(await store.claim([a.run_id, b.run_id], "n", 10))}
    assert claimed == {forbid: True, allow: False}
    assert await pg_pool.fetchval("SELECT count(*) FROM runs_running_exclusive") == 1  # G3's row, by the trigger


async def _claim_both(pg_pool: asyncpg.Pool, store: RunStore, policy: str) -> tuple[int, RunToken]:
    """Ticks 0 and 1 of a job under `policy`, claimed by n1 then n2; the second claim must win.
    The job, and the first run's token."""
    job = await insert_job(pg_pool, concurrency_policy=policy)
    a, b = await insert_run(pg_pool, job, tick(0)), await insert_run(pg_pool, job, tick(1))
    await store.claim([a.run_id], "n1", 10)
    result = await store.claim([b.run_id], "n2", 10)
    assert [r.id for r in _claimed(result)] == [b.run_id]
    return job, a


async def test_allow_runs_alongside(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job, _ = await _claim_both(pg_pool, store, "allow")
    assert [r.state for r in await runs_of(pg_pool, job)] == ["running", "running"]


async def test_replace_fails_the_older_run(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job, a = await _claim_both(pg_pool, store, "replace")
    runs = await runs_of(pg_pool, job)
    assert [(r.state, r.error) for r in runs] == [("failed", FAIL_REPLACED), ("running", None)]
    # the replaced run's executor can no longer extend or finish it
    assert await store.extend_leases([a.run_id], "n1", 10) == set()
    assert (await store.finish([Outcome(run_id=a.run_id, node_id="n1", state="completed")])).written == set()


async def test_a_replace_decided_before_its_run_was_cancelled_replaces_nothing(
    pg_pool: asyncpg.Pool, store: RunStore
) -> None:
    """A claim decides REPLACE on facts it reads unlocked; a cancel of the replacing run can commit
    before the claim applies it. The running run must then go on (serialized, the claim came after
    the cancel): the replace is conditional on the replacing run, locked with the claim of it."""
    job = await insert_job(pg_pool, concurrency_policy="replace")
    a, b = await insert_run(pg_pool, job, tick(0)), await insert_run(pg_pool, job, tick(1))
    await store.claim([a.run_id], "n1", 10)
    plan = claims.plan_claims(await pg_pool.fetch(runs_q.CLAIM_FACTS, [b.run_id], None, None), [b.run_id])
    assert plan.replace == {job: b.run_id}
    assert (await CancelStore(pg_pool).cancel(b.run_id, actor="op")).ended
    assert await claims._replace_and_claim(pg_pool, plan, job, b.run_id, "n2", 10, (None, None)) == {}
    assert [(r.state, r.error) for r in await runs_of(pg_pool, job)] == [
        ("running", None),
        ("cancelled", "cancelled by op"),
    ]


async def test_finish_is_conditional_on_ownership(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool)
    t = await insert_run(pg_pool, job, tick(0))
    await store.claim([t.run_id], "owner", 10)
    intruder = await store.finish([Outcome(run_id=t.run_id, node_id="intruder", state="completed")])
    assert intruder.written == set() and await run_state(pg_pool, t.run_id) == "running"
    done = await store.finish(
        [Outcome(run_id=t.run_id, node_id="owner", state="completed", result="ok", duration_ms=5)]
    )
    assert done.written == {t.run_id}
    again = await store.finish([Outcome(run_id=t.run_id, node_id="owner", state="failed", error="late")])
    assert again.written == set()  # never written twice
    (run,) = await runs_of(pg_pool, job)
    assert (run.state, run.result, run.duration_ms, run.error) == ("completed", "ok", 5, None)
    assert run.finished_at is not None and run.lease_until is None


async def test_failure_and_retry_commit_together(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool, max_retries=2, retry_backoff_s=30)
    t = await insert_run(pg_pool, job, tick(0))
    await store.claim([t.run_id], "n", 10)
    result = await store.finish(
        [Outcome(run_id=t.run_id, node_id="n", state="failed", error="boom", traceback="tb", retry_delay_s=30)]
    )
    assert result.written == {t.run_id} and result.retried == 1
    first, retry = await runs_of(pg_pool, job)
    assert (first.state, first.error, first.traceback) == ("failed", "boom", "tb")
    assert (retry.state, retry.attempt, retry.trigger, retry.scheduled_for) == ("queued", 2, "retry", tick(0))
    assert 25 < (retry.due_at - first.finished_at).total_seconds() <= 31  # type: ignore[operator]


async def test_extend_leases_only_for_the_owner(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool, concurrency_policy="allow")
    a, b = await insert_run(pg_pool, job, tick(0)), await insert_run(pg_pool, job, tick(1))
    await store.claim([a.run_id], "me", 1)
    await store.claim([b.run_id], "other", 1)
    assert await store.extend_leases([a.run_id, b.run_id], "me", 60) == {a.run_id}
    lease = await pg_pool.fetchval("SELECT lease_until - now() FROM runs WHERE id = $1", a.run_id)
    assert lease.total_seconds() > 50


async def _lease_ran_out(pool: asyncpg.Pool, run_id: int) -> None:
    """The run's executor stopped heartbeating a while ago: its lease is over."""
    await pool.execute("UPDATE runs SET lease_until = now() - interval '1 second' WHERE id = $1", run_id)


async def test_reap_is_fenced_by_the_epoch(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    await set_epoch(pg_pool, 7)
    job = await insert_job(pg_pool)
    t = await insert_run(pg_pool, job, tick(0))
    await store.claim([t.run_id], "dead", 60)
    await _lease_ran_out(pg_pool, t.run_id)
    with pytest.raises(NotLeader):
        await store.reap(6)
    assert await run_state(pg_pool, t.run_id) == "running"  # a deposed leader wrote nothing


async def test_reap_ends_lost_runs_and_queues_their_retry(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    await set_epoch(pg_pool, 3)
    job = await insert_job(pg_pool, max_retries=1, retry_backoff_s=0)
    alive_job = await insert_job(pg_pool)
    t = await insert_run(pg_pool, job, tick(0))
    alive = await insert_run(pg_pool, alive_job, tick(0))
    await store.claim([t.run_id], "dead", 60)
    await store.claim([alive.run_id], "alive", 60)
    await _lease_ran_out(pg_pool, t.run_id)
    result = await store.reap(3)
    assert (result.lost, result.retried, result.expired) == (1, 1, 0)
    lost, retry = await runs_of(pg_pool, job)
    assert (lost.state, lost.error, lost.node_id) == ("failed", FAIL_EXECUTOR_LOST, "dead")
    assert (retry.state, retry.attempt) == ("queued", 2)
    assert await run_state(pg_pool, alive.run_id) == "running"
    # the retry fails too: no retry left, so the reaper queues nothing more
    await store.claim([retry.id], "dead2", 60)
    await _lease_ran_out(pg_pool, retry.id)
    assert (await store.reap(3)).retried == 0
    # the lost executor waking up writes nothing
    assert (await store.finish([Outcome(run_id=t.run_id, node_id="dead", state="completed")])).written == set()


async def test_reap_expires_queued_runs_past_their_grace(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool, misfire_grace_s=60)
    stale = await insert_run(pg_pool, job, tick(0), due_at=tick(0))  # 2030 is in the future...
    # Written 61 s ago: stamped to expire 60 s after.
    await pg_pool.execute(
        "UPDATE runs SET due_at = now() - interval '61 seconds', expires_at = now() - interval '1 second'"
        " WHERE id = $1",
        stale.run_id,
    )
    fresh = await insert_run(pg_pool, job, tick(1))
    result = await store.reap(0)
    assert result.expired == 1
    runs = {r.id: r for r in await runs_of(pg_pool, job)}
    assert (runs[stale.run_id].state, runs[stale.run_id].skip_reason) == ("skipped", SKIP_EXPIRED)
    assert runs[fresh.run_id].state == "queued"


async def test_a_deadlock_is_retried_not_raised(pg_pool: asyncpg.Pool) -> None:
    """Two transactions that lock two rows in opposite orders: PostgreSQL aborts one with a
    deadlock; retry_contention runs it again, and it then succeeds."""
    job = await insert_job(pg_pool)
    a, b = await insert_run(pg_pool, job, tick(0)), await insert_run(pg_pool, job, tick(1))
    lock = "SELECT id FROM runs WHERE id = $1 FOR UPDATE"
    first_locked, second_locked = asyncio.Event(), asyncio.Event()
    attempts: list[str] = []

    async def side(mine: int, theirs: int, locked: asyncio.Event, other: asyncio.Event, name: str) -> None:
        attempts.append(name)
        with translate_errors():
            async with pg_pool.acquire() as conn, conn.transaction():
                await conn.execute("SET LOCAL deadlock_timeout = '50ms'")
                await conn.fetch(lock, mine)
                locked.set()
                await other.wait()
                await conn.fetch(lock, theirs)

    results = await asyncio.gather(
        retry_contention(lambda: side(a.run_id, b.run_id, first_locked, second_locked, "first"), "test"),
        retry_contention(lambda: side(b.run_id, a.run_id, second_locked, first_locked, "second"), "test"),
        return_exceptions=True,
    )
    assert results == [None, None]
    assert len(attempts) == 3  # one side was rolled back once and ran again


async def test_overdue_counts_queued_runs_past_due(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    job = await insert_job(pg_pool)
    now = datetime.now(UTC)
    late = [await insert_run(pg_pool, job, tick(i), due_at=now - timedelta(seconds=5)) for i in range(3)]
    await insert_run(pg_pool, job, tick(10), due_at=now + timedelta(seconds=60))  # not due yet
    await insert_run(pg_pool, job, tick(11), due_at=now)  # due, but not a second late
    assert await store.overdue() == 3
    assert await store.overdue(cap=2) == 2
    await store.claim([late[0].run_id], "n", 10)  # started: no longer overdue
    assert await store.overdue() == 2


async def test_statements_bounded_by_their_runs_ticks_find_ticks_of_any_precision(
    pg_pool: asyncpg.Pool, store: RunStore
) -> None:
    """Tokens carry scheduled_for to the millisecond (floor); a manual trigger's is now(), to the
    microsecond: the day-partition bound derived from a token still holds its run."""
    job, other = await insert_job(pg_pool), await insert_job(pg_pool)
    manual = await insert_run(pg_pool, job, datetime(2030, 1, 1, 23, 59, 59, 999_999, tzinfo=UTC), trigger="manual")
    scheduled = await insert_run(pg_pool, other, datetime(2030, 1, 2, tzinfo=UTC))  # the next day's first tick
    assert manual.scheduled_for_ms % 1000 == 999
    tokens = [manual, scheduled]
    claimed = _claimed(await store.claim([t.run_id for t in tokens], "n", 10, [t.scheduled_for_ms for t in tokens]))
    assert {c.id for c in claimed} == {manual.run_id, scheduled.run_id}
    assert await store.extend_leases([c.id for c in claimed], "n", 10, [c.scheduled_for for c in claimed]) == {
        c.id for c in claimed
    }
    outcomes = [Outcome(run_id=c.id, node_id="n", state="completed", scheduled_for=c.scheduled_for) for c in claimed]
    assert (await store.finish(outcomes)).written == {c.id for c in claimed}
    # A bound that misses a run (a token from another tick) finds nothing: the bound is real.
    again = await insert_run(pg_pool, job, datetime(2030, 1, 3, tzinfo=UTC))
    assert await store.claim([again.run_id], "n", 10, [again.scheduled_for_ms - 1]) == [Refused.NOT_QUEUED]


async def test_forbid_waits_for_a_predecessor_whose_start_was_put_off(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    # A paced catch-up run (due long after its tick) is still running at the next, on-time tick:
    # that tick waits for it. A predecessor that was on time makes the next tick a real overlap.
    job = await insert_job(pg_pool)
    now = datetime.now(UTC)
    caught_up = await insert_run(pg_pool, job, now - timedelta(seconds=5), due_at=now - timedelta(seconds=1))
    on_time = await insert_run(pg_pool, job, now - timedelta(seconds=0.5), due_at=now - timedelta(seconds=0.5))
    assert isinstance((await store.claim([caught_up.run_id], "a", 10))[0], ClaimedRun)
    assert await store.claim([on_time.run_id], "b", 10) == [Refused.WAIT]
    assert (await store.finish([Outcome(run_id=caught_up.run_id, node_id="a", state="completed")])).woken == 1
    assert isinstance((await store.claim([on_time.run_id], "b", 10))[0], ClaimedRun)
    # A tick due 2 s ago behind an on-time predecessor: it would have waited past ON_TIME_S.
    later = await insert_run(pg_pool, job, now + timedelta(seconds=30), due_at=now - timedelta(seconds=2))
    assert await store.claim([later.run_id], "c", 10) == [Refused.OVERLAP]


async def test_a_claim_past_the_misfire_grace_expires_the_run_instead(pg_pool: asyncpg.Pool, store: RunStore) -> None:
    # A token held through an outage by a paused executor reaches the claim long after its tick:
    # the misfire policy already ran another tick for it, so this one must not start (the
    # protocol model found it: tests/model, STALE_IN_FLIGHT).
    job = await insert_job(pg_pool, misfire_grace_s=60)
    now = datetime.now(UTC)
    stale = await insert_run(pg_pool, job, now - timedelta(seconds=90), due_at=now - timedelta(seconds=90))
    fresh = await insert_run(pg_pool, job, now - timedelta(seconds=30), due_at=now - timedelta(seconds=30))
    assert await store.claim([stale.run_id], "n", 10) == [Refused.EXPIRED]
    first, _ = await runs_of(pg_pool, job)
    assert (first.state, first.skip_reason) == ("skipped", SKIP_EXPIRED)
    assert isinstance((await store.claim([fresh.run_id], "n", 10))[0], ClaimedRun)  # late within the grace: runs


async def test_claims_finishes_and_heartbeats_at_once_neither_deadlock_nor_lose_a_wakeup(
    pg_pool: asyncpg.Pool, store: RunStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Claims of runs that must wait, the finishes of the runs they wait for and the heartbeats of
    those runs, all at once over many jobs, the batches' runs in opposite orders: every run that
    waited is woken, by the end or by the claim's look again (waiters.wake_free), none is left
    waiting with nothing running ahead, and no statement deadlocks (a claim locks nothing)."""
    await set_epoch(pg_pool, 1)
    jobs = [await insert_job(pg_pool, concurrency_policy="buffer_all") for _ in range(40)]
    for round_ in range(4):
        first = [await insert_run(pg_pool, j, tick(2 * round_)) for j in jobs]
        # written in the other order: the waiting runs' ids run against their predecessors'
        second = [await insert_run(pg_pool, j, tick(2 * round_ + 1)) for j in reversed(jobs)]
        running = [r.id for r in _claimed(await store.claim([t.run_id for t in first], "n1", 60))]
        assert len(running) == len(jobs)
        waiting = [t.run_id for t in second]
        ends = [Outcome(run_id=i, node_id="n1", state="completed") for i in running]
        answers = await asyncio.gather(
            *(store.claim(waiting[k : k + 10], "n2", 60) for k in range(0, len(waiting), 10)),
            *(store.finish(ends[k : k + 10]) for k in range(0, len(ends), 10)),
            *(store.extend_leases(running[::-1][k : k + 10], "n1", 60) for k in range(0, len(running), 10)),
        )
        states = await pg_pool.fetch("SELECT id, state FROM runs WHERE id = ANY($1::bigint[])", waiting)
        assert {r["state"] for r in states} <= {"queued", "running"}, sorted((r["id"], r["state"]) for r in states)
        # the woken runs run, and they and those claimed at once end: the next round starts afresh
        woken = [r["id"] for r in states if r["state"] == "queued"]
        claimed = [r.id for r in _claimed(await store.claim(woken, "n3", 60))]
        assert len(claimed) == len(woken)
        at_once = [r.id for batch in answers[: len(waiting) // 10] for r in _claimed(batch)]
        ends = [Outcome(run_id=i, node_id="n3", state="completed") for i in claimed]
        ends += [Outcome(run_id=i, node_id="n2", state="completed") for i in at_once]
        assert sorted((await store.finish(ends)).written) == sorted(claimed + at_once)
    deadlocks = [r.getMessage() for r in caplog.records if "deadlock" in r.getMessage()]
    assert not deadlocks, deadlocks


async def test_the_one_statement_claim_takes_exactly_the_runs_the_lifecycle_claims_at_once(
    pg_pool: asyncpg.Pool, store: RunStore
) -> None:
    """CLAIM_FREE against lifecycle.claims_at_once, case by case: each policy, with a run of the
    job running or not, past its grace or not, alone in the batch or with another run of its job."""
    expected, batch = set(), []
    for policy in ("forbid", "allow", "replace", "buffer_one", "buffer_all"):
        for running in (False, True):
            for expired in (False, True):
                for twice in (False, True):
                    job = await insert_job(pg_pool, concurrency_policy=policy, misfire_grace_s=60)
                    if running:
                        ahead = await insert_run(pg_pool, job, tick(0))
                        assert _claimed(await store.claim([ahead.run_id], "other", 60))
                    due = datetime.now(UTC) - timedelta(seconds=120 if expired else 0)
                    runs = [await insert_run(pg_pool, job, tick(n), due_at=due) for n in range(1, 2 + twice)]
                    batch += [r.run_id for r in runs]
                    if claims_at_once(policy, running=running, expired_=expired, of_job_in_batch=len(runs)):  # type: ignore[arg-type]
                        expected.update(r.run_id for r in runs)
    rows = await pg_pool.fetch(runs_q.CLAIM_FREE, batch, "n", 60.0, None, None, "running")
    assert {r["id"] for r in rows} == expected
    exclusive = {r["id"]: r["exclusive"] for r in rows}
    assert len(expected) == 6  # alone, within its grace: nothing running (each policy), or running under allow
    assert sum(not e for e in exclusive.values()) == 2  # the allow jobs' runs: not exclusive (G3 leaves them)
