"""The executor end to end against real PostgreSQL and Redis: token -> lock -> claim ->
run -> record -> release -> ack, with the concurrency policies, timeouts and retries."""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest
import redis.asyncio as aioredis

import cronos
from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.models import FAIL_REPLACED, SKIP_OVERLAP
from cronos.settings import Settings
from cronos.store.cancels import CancelStore
from cronos.store.jobs import JobStore
from cronos.stream import RunStream
from executor import deps as executor_deps
from executor.service import Executor
from tests.integration.ledger_helpers import Harness, insert_run, push_due_retries, tick
from tests.waiting import wait_for

EXECUTIONS: collections.Counter[int] = collections.Counter()
RELEASE: dict[str, asyncio.Event] = {}
FAIL_UNTIL: dict[int, int] = {}
WALL_CLOCK_AT_START: dict[int, float] = {}


@cronos.task("test.count", replace=True)
async def _count(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
    EXECUTIONS[ctx.run_id] += 1
    return {"key": ctx.idempotency_key, "attempt": ctx.attempt}


@cronos.task("test.clock", replace=True)
async def _clock(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    WALL_CLOCK_AT_START[ctx.run_id] = time.time()


@cronos.task("test.block", replace=True)
async def _block(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
    EXECUTIONS[ctx.run_id] += 1
    await RELEASE.setdefault(payload["gate"], asyncio.Event()).wait()
    return "released"


@cronos.task("test.nap", replace=True)
async def _nap(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    await asyncio.sleep(payload["seconds"])


@cronos.task("test.flaky", replace=True)
def _flaky(payload: dict[str, Any], ctx: cronos.RunContext) -> str:  # sync: runs in a thread
    if ctx.attempt <= FAIL_UNTIL.get(ctx.job_id, 10**6):
        raise RuntimeError(f"attempt {ctx.attempt} failed")
    return "finally"


Factory = Callable[..., AbstractAsyncContextManager[Executor]]


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    EXECUTIONS.clear()  # run ids restart at 1 in every test database
    FAIL_UNTIL.clear()
    WALL_CLOCK_AT_START.clear()


@pytest.fixture
async def harness(pg_pool: asyncpg.Pool, redis_client: aioredis.Redis, settings: Settings) -> Harness:
    stream = RunStream(redis_client, Keys(settings.key_prefix))
    await stream.ensure_group()
    return Harness(pg_pool, stream)


@pytest.fixture
def executor(settings: Settings) -> Factory:
    @asynccontextmanager
    async def start(node: str = "a", **overrides: Any) -> AsyncIterator[Executor]:
        own = msgspec.structs.replace(settings, node_id=f"{settings.node_id}-{node}", **overrides)
        async with Executor(own) as ex:
            yield ex

    return start


@asynccontextmanager
async def running(ex: Executor) -> AsyncIterator[asyncio.Task[None]]:
    """`ex.run()` in the background; stopped (drained) on exit."""
    task = asyncio.create_task(ex.run())
    try:
        yield task
    finally:
        ex.stop()
        await asyncio.wait_for(task, 10)


def gate(name: str) -> dict[str, str]:
    RELEASE[name] = asyncio.Event()
    return {"action": "test.block", "gate": name}


async def test_noop_run_completes_and_token_is_settled(harness: Harness, executor: Factory, redis_client: Any) -> None:
    job = await harness.job(payload={"action": "test.count"})
    token = await harness.queue(job)
    async with executor() as ex:
        counts = await ex.run_once()
    assert counts == {"completed": 1}
    (run,) = await harness.runs(job)
    assert run.state == "completed" and run.node_id is not None and run.started_at and run.finished_at
    assert run.result is not None and f'"key":"{job}:2030-01-01T00:00:00+00:00"' in run.result
    assert EXECUTIONS[token.run_id] == 1
    info = await harness.stream.info()
    assert info.pending == 0  # acknowledged
    lock = Keys(ex.settings.key_prefix).tick_lock(job, token.scheduled_for_ms, 1)
    assert await redis_client.exists(lock) == 0  # released


async def test_a_token_read_past_its_runs_grace_is_acknowledged_without_a_lock_or_a_claim(
    harness: Harness, executor: Factory
) -> None:
    """An overload whose backlog outgrew the misfire grace: a token read past its run's grace is
    only acknowledged (its run can only end expired, which the reaper does), so the executor's
    work goes to the runs still within theirs, which run."""
    late_job = await harness.job(payload={"action": "test.count"})
    fresh_job = await harness.job(payload={"action": "test.count"})
    now_ms = int(time.time() * 1000)
    late = msgspec.structs.replace(await insert_run(harness.pool, late_job, tick(0)), expires_ms=now_ms - 5_000)
    fresh = msgspec.structs.replace(await insert_run(harness.pool, fresh_job, tick(0)), expires_ms=now_ms + 60_000)
    await harness.stream.publish([late, fresh])
    async with executor() as ex:
        counts = await ex.run_once()
    assert counts == {"past_grace": 1, "completed": 1}
    (left,) = await harness.runs(late_job)
    assert (left.state, left.node_id, EXECUTIONS[late.run_id]) == ("queued", None, 0)  # never claimed
    assert [r.state for r in await harness.runs(fresh_job)] == ["completed"]
    assert (await harness.stream.info()).pending == 0  # both acknowledged


async def test_a_token_of_an_older_leader_without_an_expiry_is_judged_by_its_runs_stamped_one(
    harness: Harness, executor: Factory
) -> None:
    """A token pushed by the release before expiries were carried (no `expires_ms`: a rolling
    upgrade) is claimed, and the claim judges its run by the expiry stamped on it: past it, the run
    ends skipped "expired" unstarted; within it, the run runs."""
    late_job = await harness.job(payload={"action": "test.count"}, misfire_grace_s=60)
    fresh_job = await harness.job(payload={"action": "test.count"}, misfire_grace_s=60)
    due = datetime.now(UTC) - timedelta(seconds=120)  # stamped to expire 60 s ago
    late = await insert_run(harness.pool, late_job, tick(0), due_at=due)
    fresh = await insert_run(harness.pool, fresh_job, tick(0))
    assert late.expires_ms is None and fresh.expires_ms is None
    await harness.stream.publish([late, fresh])
    async with executor() as ex:
        counts = await ex.run_once()
    assert counts == {"expired": 1, "completed": 1}
    (left,) = await harness.runs(late_job)
    assert (left.state, left.skip_reason, EXECUTIONS[late.run_id]) == ("skipped", "expired", 0)
    assert [r.state for r in await harness.runs(fresh_job)] == ["completed"]


async def test_two_executors_racing_for_one_token_run_it_once(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload={"action": "test.count"})
    token = await harness.queue(job)
    await harness.stream.publish([token, token])  # the leader re-pushed it (e.g. after failover)
    async with executor("a") as a, executor("b") as b:
        counts = await asyncio.gather(a.run_once(), b.run_once())
    assert EXECUTIONS[token.run_id] == 1
    total = collections.Counter(counts[0]) + collections.Counter(counts[1])
    assert total["completed"] == 1 and total["lock_denied"] + total["not_queued"] == 2
    assert [r.state for r in await harness.runs(job)] == ["completed"]
    assert (await harness.stream.info()).pending == 0


async def test_forbid_overlap_ends_skipped_with_reason(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload=gate("forbid"))
    first = await harness.queue(job, 0)
    # a holds one token, busy with the first run: it must not read the second
    async with executor("a", executor_concurrency=1, executor_prefetch=1) as a, running(a), executor("b") as b:
        await wait_for(lambda: _is(harness, first.run_id, "running"), what="first run running")
        # Due 2 s ago behind an on-time run that still runs: it would have waited past ON_TIME_S.
        second = await harness.queue(job, 1, due_at=datetime.now(UTC) - timedelta(seconds=2))
        assert await b.run_once() == {"skipped": 1}
        RELEASE["forbid"].set()
        await wait_for(lambda: _is(harness, first.run_id, "completed"), what="first run completed")
    runs = {r.id: r for r in await harness.runs(job)}
    assert (runs[second.run_id].state, runs[second.run_id].skip_reason) == ("skipped", SKIP_OVERLAP)
    assert EXECUTIONS[second.run_id] == 0


async def test_forbid_catch_up_runs_one_after_another_instead_of_skipping(harness: Harness, executor: Factory) -> None:
    # A failover's catch-up: five overdue ticks of a forbid job reach the executor together.
    # Each waits for the one before it (none was running at their ticks): none is skipped.
    job = await harness.job(payload={"action": "test.nap", "seconds": 0.05})
    now = datetime.now(UTC)
    tokens = [await insert_run(harness.pool, job, now - timedelta(seconds=5 - i)) for i in range(5)]
    await harness.stream.publish(tokens)
    async with harness.outbox(), executor("a") as ex, running(ex):
        await wait_for(lambda: _count_state(harness, job, "completed", 5), timeout=20, what="five catch-up runs")
    runs = sorted(await harness.runs(job), key=lambda r: r.scheduled_for)
    assert [r.state for r in runs] == ["completed"] * 5
    for before, after in itertools.pairwise(runs):
        assert before.finished_at is not None and after.started_at is not None
        assert after.started_at >= before.finished_at, "in tick order, one at a time (G3)"


async def test_buffer_all_runs_an_overlapping_tick_when_its_predecessor_ends(
    harness: Harness, executor: Factory
) -> None:
    job = await harness.job(payload=gate("buffer"), concurrency_policy="buffer_all")
    first = await harness.queue(job, 0)
    async with harness.outbox(), executor("a") as ex, running(ex):
        await wait_for(lambda: _is(harness, first.run_id, "running"), what="first run running")
        second = await harness.queue(job, 1)
        # The second run waits, holding no token: its predecessor's end wakes it, and the leader pushes it.
        await wait_for(lambda: _is(harness, second.run_id, "waiting"), what="the second run waiting")
        await wait_for(lambda: _pending_is(harness, 1), what="only the running run's token held")
        RELEASE["buffer"].set()
        await wait_for(lambda: _is(harness, second.run_id, "completed"), timeout=10, what="buffered run completed")
    assert EXECUTIONS[second.run_id] == 1


async def test_forbid_runs_a_tick_whose_predecessor_ends_within_its_wait(harness: Harness, executor: Factory) -> None:
    # The previous run is still running at the next tick (a failover or a handover made it start
    # late): the tick waits, woken by the end, instead of being skipped.
    job = await harness.job(payload=gate("forbid_wait"))
    first = await harness.queue(job, 0)
    async with harness.outbox(), executor("a") as ex, running(ex):
        await wait_for(lambda: _is(harness, first.run_id, "running"), what="first run running")
        second = await harness.queue(job, 1)
        await wait_for(lambda: _is(harness, second.run_id, "waiting"), what="the second run waiting")
        RELEASE["forbid_wait"].set()
        await wait_for(lambda: _is(harness, second.run_id, "completed"), timeout=10, what="the second run completed")
    assert EXECUTIONS[second.run_id] == 1


async def test_allow_runs_two_at_once(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload=gate("allow"), concurrency_policy="allow")
    await harness.queue(job, 0)
    await harness.queue(job, 1)
    async with executor() as ex, running(ex):
        await wait_for(lambda: _count_state(harness, job, "running", 2), what="two running runs")
        RELEASE["allow"].set()
        await wait_for(lambda: _count_state(harness, job, "completed", 2), what="both completed")


async def test_replace_cancels_the_older_run(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload=gate("replace"), concurrency_policy="replace")
    old = await harness.queue(job, 0)
    async with (
        executor("a", executor_concurrency=1, executor_prefetch=1) as a,
        running(a),
        executor("b") as b,
        running(b),
    ):
        await wait_for(lambda: _is(harness, old.run_id, "running"), what="old run running")
        new = await harness.queue(job, 1)
        await wait_for(lambda: _is(harness, new.run_id, "running"), what="new run running")
        # the old run's executor notices at its next heartbeat and cancels the work
        await wait_for(lambda: _value(a.counts.get("lost", 0)), timeout=5, what="old executor reports lost")
        RELEASE["replace"].set()
        await wait_for(lambda: _is(harness, new.run_id, "completed"), what="new run completed")
    runs = {r.id: r for r in await harness.runs(job)}
    assert (runs[old.run_id].state, runs[old.run_id].error) == ("failed", FAIL_REPLACED)


async def test_runs_at_most_its_concurrency_and_holds_at_most_its_prefetch(harness: Harness, executor: Factory) -> None:
    jobs = [await harness.job(payload=gate("slots")) for _ in range(5)]
    for job in jobs:
        await harness.queue(job)
    async with executor(executor_concurrency=2, executor_prefetch=3) as ex, running(ex):
        await wait_for(lambda: _running_total(harness, 2), what="two runs running")
        assert ex.deps is not None and ex.consumer is not None
        await wait_for(_true(lambda: ex.deps is not None and ex.deps.gate.queued == 1), what="a third waiting")
        assert ex.consumer.free == 0  # in hand: its prefetch, so it reads nothing more
        info = await harness.stream.info()
        assert info.consumers == {ex.node_id: 3} and info.lag == 2  # two tokens left for others
        assert await _running_total(harness, 2)  # the third is in hand, not claimed
        RELEASE["slots"].set()
        await wait_for(lambda: _count_all(harness, "completed", 5), what="all five completed")


def _true(condition: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return condition()

    return probe


async def _running_total(harness: Harness, n: int) -> bool:
    return await harness.pool.fetchval("SELECT count(*) FROM runs WHERE state = 'running'") == n


async def _count_all(harness: Harness, state: str, n: int) -> bool:
    return await harness.pool.fetchval("SELECT count(*) FROM runs WHERE state = $1", state) == n


async def test_timeout_fails_the_run(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload={"action": "sleep", "seconds": 30}, timeout_s=0.3)
    await harness.queue(job)
    async with executor() as ex:
        assert await ex.run_once() == {"failed": 1}
    (run,) = await harness.runs(job)
    assert (run.state, run.error) == ("failed", "timed out after 0.3 s")
    assert run.duration_ms is not None and 250 < run.duration_ms < 2000


async def test_retry_chain_runs_attempts_one_to_n(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload={"action": "test.flaky"}, max_retries=3, retry_backoff_s=0)
    FAIL_UNTIL[job] = 2  # attempts 1 and 2 fail, 3 completes
    await harness.queue(job)
    async with executor() as ex:
        await ex.run_once()
        while await push_due_retries(harness.pool, harness.stream):
            await ex.run_once()
    runs = await harness.runs(job)
    assert [(r.attempt, r.state, r.trigger) for r in runs] == [
        (1, "failed", "schedule"),
        (2, "failed", "retry"),
        (3, "completed", "retry"),
    ]
    assert runs[0].error == "RuntimeError: attempt 1 failed" and "Traceback" in (runs[0].traceback or "")
    assert len({r.scheduled_for for r in runs}) == 1


async def test_retries_stop_after_max_retries(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload={"action": "test.flaky"}, max_retries=2, retry_backoff_s=0)
    await harness.queue(job)
    async with executor() as ex:
        await ex.run_once()
        while await push_due_retries(harness.pool, harness.stream):
            await ex.run_once()
    assert [(r.attempt, r.state) for r in await harness.runs(job)] == [(1, "failed"), (2, "failed"), (3, "failed")]


async def test_unknown_action_fails_clearly(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload={"action": "no-such-thing"})
    await harness.queue(job)
    async with executor() as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert (run.state, run.error) == ("failed", "no task registered for action 'no-such-thing'")


async def test_lost_ownership_cancels_and_reports_nothing(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload=gate("lost"))
    token = await harness.queue(job)
    async with executor() as ex, running(ex):
        await wait_for(lambda: _is(harness, token.run_id, "running"), what="run running")
        # another node took the run over (what the reaper + a retry look like to this executor)
        await harness.pool.execute("UPDATE runs SET node_id = 'thief' WHERE id = $1", token.run_id)
        await wait_for(lambda: _value(ex.counts.get("lost", 0)), timeout=5, what="executor reports lost")
    (run,) = await harness.runs(job)
    assert (run.state, run.node_id, run.finished_at) == ("running", "thief", None)  # untouched
    assert (await harness.stream.info()).pending == 0


async def test_drain_finishes_short_runs_and_records_cancelled_long_ones(harness: Harness, executor: Factory) -> None:
    short = await harness.job(payload={"action": "sleep", "seconds": 0.3})
    long = await harness.job(payload=gate("drain"), max_retries=1)
    await harness.queue(short)
    await harness.queue(long)
    async with executor(drain_timeout_s=1.0) as ex:
        task = asyncio.create_task(ex.run())
        await wait_for(lambda: _count_state(harness, long, "running", 1), what="long run running")
        ex.stop()
        ex.stop()  # idempotent
        await asyncio.wait_for(task, 5)
    assert [r.state for r in await harness.runs(short)] == ["completed"]
    cancelled, retry = await harness.runs(long)
    assert (cancelled.state, cancelled.error) == ("failed", "cancelled: executor shutting down")
    assert (retry.state, retry.attempt) == ("queued", 2)  # another executor will run it
    assert (await harness.stream.info()).pending == 0


async def test_own_pending_entries_are_read_first_after_restart(
    harness: Harness, executor: Factory, settings: Settings
) -> None:
    job = await harness.job(payload={"action": "test.count"})
    token = await harness.queue(job)
    # a previous life of this executor read the token and died before acknowledging it
    node = f"{settings.node_id}-a"
    assert len(await harness.stream.read(node, 10, None)) == 1
    async with executor("a") as ex:
        assert await ex.run_once() == {"completed": 1}
    assert EXECUTIONS[token.run_id] == 1 and (await harness.stream.info()).pending == 0


async def test_idle_entries_of_a_dead_consumer_are_reclaimed(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload={"action": "test.count"})
    token = await harness.queue(job)
    assert len(await harness.stream.read("ghost", 10, None)) == 1  # read by a consumer that died
    async with executor() as ex:
        assert ex.consumer is not None
        ex.consumer.autoclaim_idle_ms = 0  # the idle threshold (2 leases) has passed
        assert await ex.run_once() == {"completed": 1}
    assert EXECUTIONS[token.run_id] == 1 and (await harness.stream.info()).consumers.get("ghost") == 0


async def test_a_long_run_keeps_its_token_from_other_executors(harness: Harness, executor: Factory) -> None:
    job = await harness.job(payload=gate("long"))
    token = await harness.queue(job)
    async with executor("a", executor_concurrency=1) as a, running(a), executor("b") as b, running(b):
        await wait_for(lambda: _is(harness, token.run_id, "running"), what="run running")
        assert b.consumer is not None
        b.consumer.autoclaim_idle_ms = 1000  # b reclaims anything idle for 1 s (a beats every 0.5 s)
        passes = b.consumer.autoclaims
        consumer = b.consumer
        await wait_for(_true(lambda: consumer.autoclaims >= passes + 2), what="two of b's reclaim passes")
        assert b.counts == {} and (await harness.stream.info()).consumers.get(a.node_id) == 1
        RELEASE["long"].set()
        await wait_for(lambda: _is(harness, token.run_id, "completed"), what="run completed")


async def test_malformed_entry_is_acknowledged(harness: Harness, executor: Factory, redis_client: Any) -> None:
    await redis_client.xadd(harness.stream.key, {b"t": b"\xc1not msgpack"})
    async with executor() as ex:
        assert await ex.run_once() == {"malformed": 1}
    assert (await harness.stream.info()).pending == 0


async def test_result_is_written_after_postgresql_drops_connections(
    harness: Harness, executor: Factory, database_url: str
) -> None:
    job = await harness.job(payload=gate("pgdown"))
    token = await harness.queue(job)
    async with executor() as ex, running(ex):
        await wait_for(lambda: _is(harness, token.run_id, "running"), what="run running")
        killer = await asyncpg.connect(database_url)
        try:  # every connection of the executor's pool dies (a PostgreSQL restart looks like this)
            await killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        finally:
            await killer.close()
        RELEASE["pgdown"].set()
        await wait_for(lambda: _tolerant(_is(harness, token.run_id, "completed")), timeout=10, what="result written")
    assert EXECUTIONS[token.run_id] == 1


async def _is(harness: Harness, run_id: int, state: str) -> bool:
    return await harness.state(run_id) == state


async def _tolerant(probe: Awaitable[bool]) -> bool:
    try:
        return await probe
    except (asyncpg.PostgresConnectionError, asyncpg.InterfaceError, asyncpg.exceptions.InternalClientError, OSError):
        return False  # the test's own pool lost its connections too


async def _pending_is(harness: Harness, n: int) -> bool:
    return (await harness.stream.info()).pending == n


async def _count_state(harness: Harness, job: int, state: str, n: int) -> bool:
    return sum(r.state == state for r in await harness.runs(job)) == n


def _value(v: Any) -> Awaitable[Any]:
    async def probe() -> Any:
        return v

    return probe()


async def _push_ahead(harness: Harness, job_ids: list[int], due: datetime) -> list[RunToken]:
    """Queued runs due at `due` whose tokens go out now, ahead of it, as the leader pushes them."""
    due_ms = int(due.timestamp() * 1000)
    tokens = [
        msgspec.structs.replace(await insert_run(harness.pool, job, due, due_at=due), due_ms=due_ms) for job in job_ids
    ]
    await harness.stream.publish(tokens)
    return tokens


def _soon(seconds: float) -> datetime:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0) + timedelta(seconds=1)


async def test_a_token_pushed_ahead_is_locked_and_reserved_at_once_and_started_at_its_due_time_not_before(
    harness: Harness, executor: Factory, redis_client: Any, settings: Settings
) -> None:
    jobs = [await harness.job(payload={"action": "test.clock"}) for _ in range(20)]
    due = _soon(1.0)
    tokens = await _push_ahead(harness, jobs, due)
    locks = [Keys(settings.key_prefix).tick_lock(t.job_id, t.scheduled_for_ms, 1) for t in tokens]
    async with executor(push_lead_ms=3000, executor_concurrency=len(jobs), reserve_ahead=True) as ex, running(ex):
        await wait_for(lambda: _all_exist(redis_client, locks), what="tick locks taken ahead of the due time")
        await wait_for(lambda: _count_all(harness, "reserved", len(tokens)), what="runs reserved ahead of the due time")
        assert datetime.now(UTC) < due, "reserved ahead, not running before due"
        await wait_for(lambda: _count_all(harness, "completed", len(tokens)), timeout=5, what="runs started once due")
    for token in tokens:
        (run,) = await harness.runs(token.job_id)
        assert run.started_at is not None and run.started_at >= due, "PostgreSQL's clock: never before due"
        assert WALL_CLOCK_AT_START[token.run_id] >= due.timestamp(), "the executor's clock: never before due"
    assert ex.deps is not None and ex.deps.reserves.batches == 1, "everything pushed at once: one reservation"
    assert (ex.deps.starting.batches, ex.deps.claims.batches) == (1, 0), "started at the instant without a claim"


async def test_a_burst_is_reserved_in_batches_back_to_back_and_starts_at_its_instant_without_a_claim(
    harness: Harness, executor: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor_deps, "CLAIM_BATCH", 4)
    jobs = [await harness.job(payload={"action": "test.clock"}) for _ in range(10)]
    due = _soon(1.0)
    tokens = await _push_ahead(harness, jobs, due)
    async with executor(push_lead_ms=3000, executor_concurrency=len(jobs), reserve_ahead=True) as ex, running(ex):
        await wait_for(lambda: _count_all(harness, "completed", len(tokens)), timeout=5, what="runs started once due")
    assert ex.deps is not None and ex.deps.reserves.batches == 3, "10 runs reserved in statements of 4, 4 and 2"
    assert ex.deps.claims.batches == 0
    starts = [WALL_CLOCK_AT_START[t.run_id] for t in tokens]
    assert min(starts) >= due.timestamp() and max(starts) - min(starts) < 0.5, "the burst starts together"


async def test_a_reserved_run_whose_lease_cannot_cover_its_start_is_given_back_and_claimed(
    harness: Harness, executor: Factory
) -> None:
    # A lease shorter than the start margin: at the due instant the reservation cannot be trusted
    # (lifecycle.startable), so the run is given back (queued) and claimed like any queued run.
    jobs = [await harness.job(payload={"action": "test.clock"}) for _ in range(3)]
    due = _soon(1.0)
    tokens = await _push_ahead(harness, jobs, due)
    short_lease = executor(push_lead_ms=3000, run_lease_s=0.5, executor_concurrency=len(jobs), reserve_ahead=True)
    async with short_lease as ex, running(ex):
        await wait_for(lambda: _count_all(harness, "completed", len(tokens)), timeout=5, what="runs claimed once due")
    assert ex.deps is not None and ex.deps.reserves.batches >= 1 and ex.deps.given_back == len(tokens)
    for token in tokens:
        (run,) = await harness.runs(token.job_id)
        assert run.started_at is not None and run.started_at >= due
        assert EXECUTIONS.get(token.run_id, 0) <= 1


async def test_a_reserved_run_shows_reserved_until_it_starts_then_running_then_its_end(
    harness: Harness, executor: Factory
) -> None:
    job = await harness.job(payload=gate("reserved_long"))
    due = _soon(1.0)
    (token,) = await _push_ahead(harness, [job], due)
    async with executor(push_lead_ms=3000, reserve_ahead=True) as ex, running(ex):
        await wait_for(lambda: _is(harness, token.run_id, "reserved"), what="the run reserved ahead")
        assert datetime.now(UTC) < due, "reserved, not running, before its due time"
        await wait_for(lambda: _is(harness, token.run_id, "running"), timeout=5, what="running once started")
        assert datetime.now(UTC) >= due
        RELEASE["reserved_long"].set()
        await wait_for(lambda: _is(harness, token.run_id, "completed"), timeout=5, what="the run completed")
    (run,) = await harness.runs(token.job_id)
    assert run.started_at is not None and run.started_at >= due
    assert ex.deps is not None and (ex.deps.starting.batches, ex.deps.claims.batches) == (1, 0), "started, not claimed"


async def test_a_reserved_run_the_api_takes_back_before_its_instant_never_starts(
    harness: Harness, executor: Factory
) -> None:
    # Reserved ahead, then, before the due instant, one job paused (its change takes the run back,
    # its hand-over skips it), one run cancelled (ended at once): the start at the instant finds
    # neither reserved, and neither runs. A third, untouched, starts.
    paused, cancelled, kept = [await harness.job(payload={"action": "test.clock"}) for _ in range(3)]
    due = _soon(2.0)
    tokens = await _push_ahead(harness, [paused, cancelled, kept], due)
    async with executor(push_lead_ms=5000, executor_concurrency=3, reserve_ahead=True) as ex, running(ex):
        await wait_for(lambda: _count_all(harness, "reserved", 3), what="the runs reserved ahead")
        await JobStore(harness.pool).set_status(paused, "paused")
        assert (await CancelStore(harness.pool).cancel(tokens[1].run_id, actor="ops")).ended, "not started: at once"
        assert datetime.now(UTC) < due, "taken back before the instant"
        await wait_for(lambda: _is(harness, tokens[2].run_id, "completed"), timeout=5, what="the kept run ran")
        await wait_for(lambda: _pending_is(harness, 0), timeout=5, what="every token settled")
    assert [await harness.state(t.run_id) for t in tokens] == ["skipped", "cancelled", "completed"]
    assert tokens[0].run_id not in WALL_CLOCK_AT_START and tokens[1].run_id not in WALL_CLOCK_AT_START
    assert tokens[2].run_id in WALL_CLOCK_AT_START


async def test_a_held_token_is_given_back_unclaimed_at_the_drain_deadline(
    harness: Harness, executor: Factory, redis_client: Any, settings: Settings
) -> None:
    job = await harness.job(payload={"action": "test.count"})
    (token,) = await _push_ahead(harness, [job], _soon(10.0))
    lock = Keys(settings.key_prefix).tick_lock(job, token.scheduled_for_ms, 1)
    async with executor(push_lead_ms=15_000, drain_timeout_s=0.1) as ex:
        task = asyncio.create_task(ex.run())
        await wait_for(lambda: _all_exist(redis_client, [lock]), what="tick lock taken ahead")
        ex.stop()
        await asyncio.wait_for(task, 5)
    assert ex.counts == {"given_back": 1}
    assert await redis_client.exists(lock) == 0, "released for whoever takes the token"
    assert await harness.state(token.run_id) == "queued"
    # Handed back to the group as the executor left (executor.leaving): unread, for the next reader;
    # nothing pending, and its consumer gone.
    info = await harness.stream.info()
    assert (info.pending, info.lag, info.consumers) == (0, 1, {}), info
    (again,) = await harness.stream.read("another", 10, None)
    assert again.token == token


async def _all_exist(client: Any, keys: list[str]) -> bool:
    return bool(await client.exists(*keys) == len(keys))
