"""The leader's tick loop against real PostgreSQL and Redis, driven by run_once(now)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest
import redis.asyncio as aioredis

from cronos import metrics
from cronos.errors import NotLeader
from cronos.keys import Keys
from cronos.messages import TOKEN_FIELD, RunToken
from cronos.models import SKIP_PENDING
from cronos.settings import Settings
from cronos.store.epoch import EpochStore
from cronos.store.jobs import JobStore
from cronos.store.ledger import Ledger
from cronos.stream import RunStream
from dispatcher.auditor import Auditor
from dispatcher.listener import Change
from dispatcher.publisher import Publisher
from dispatcher.ticker import WRITE_MARGIN_S, Ticker

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
_names = itertools.count()


@dataclass
class Stack:
    pool: asyncpg.Pool
    redis: aioredis.Redis
    keys: Keys
    ledger: Ledger
    publisher: Publisher
    epoch: int
    new_ticker: Callable[[], Ticker]

    async def tokens(self) -> list[RunToken]:
        stream = RunStream(self.redis, self.keys)
        found = await stream.read(f"reader-{next(_names)}", 100_000, block_ms=None)
        return [d.token for d in found if d.token is not None]

    async def runs(self, job_id: int | None = None) -> list[asyncpg.Record]:
        return await self.pool.fetch(  # type: ignore[no-any-return]
            "SELECT * FROM runs WHERE $1::bigint IS NULL OR job_id = $1 ORDER BY job_id, scheduled_for, attempt",
            job_id,
        )

    async def cursor(self, job_id: int) -> datetime:
        return await self.pool.fetchval("SELECT last_scheduled_for FROM jobs WHERE id = $1", job_id)  # type: ignore[no-any-return]


async def add_job(pool: asyncpg.Pool, expression: str, cursor: datetime = T0, **fields: Any) -> int:
    values = {"misfire_policy": "run_all", "misfire_grace_s": 60.0, "jitter_s": 0.0, "status": "active"} | fields
    return int(
        await pool.fetchval(
            "INSERT INTO jobs (name, cron_expression, misfire_policy, misfire_grace_s, jitter_s, status,"
            " last_scheduled_for) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
            f"job-{next(_names)}",
            expression,
            values["misfire_policy"],
            values["misfire_grace_s"],
            values["jitter_s"],
            values["status"],
            cursor,
        )
    )


@pytest.fixture
async def stack(settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis) -> Stack:
    keys = Keys(settings.key_prefix)
    ledger = Ledger(pg_pool)
    publisher = Publisher(redis_client, keys)
    await publisher.prepare()
    epoch = (await EpochStore(pg_pool).take("test-leader")).epoch

    def new_ticker() -> Ticker:
        return Ticker(ledger, publisher, lambda: epoch, resync_interval_s=3600, lookahead_s=0)

    return Stack(pg_pool, redis_client, keys, ledger, publisher, epoch, new_ticker)


async def test_due_ticks_are_written_then_pushed_once(stack: Stack) -> None:
    job = await add_job(stack.pool, "*/2 * * * * *")
    ticker = stack.new_ticker()
    first = await ticker.run_once(T0 + timedelta(seconds=2.3))
    assert (first.queued, first.pushed, first.skipped) == (1, 1, 0)
    again = await ticker.run_once(T0 + timedelta(seconds=3.9))
    assert (again.queued, again.pushed) == (0, 0)
    await ticker.run_once(T0 + timedelta(seconds=4.0))

    runs = await stack.runs(job)
    assert [(r["scheduled_for"], r["state"], r["trigger"], r["attempt"], r["epoch"]) for r in runs] == [
        (T0 + timedelta(seconds=s), "queued", "schedule", 1, stack.epoch) for s in (2, 4)
    ]
    tokens = await stack.tokens()
    assert [(t.run_id, t.job_id, t.scheduled_for_ms, t.epoch) for t in tokens] == [
        (r["id"], job, int(r["scheduled_for"].timestamp() * 1000), stack.epoch) for r in runs
    ]
    assert await stack.cursor(job) == T0 + timedelta(seconds=4)
    assert ticker.next_wake(T0 + timedelta(seconds=4)) <= T0 + timedelta(seconds=6)


@pytest.mark.parametrize("traced", [False, True])
async def test_tokens_carry_their_tick_write_only_while_traces_are_on(stack: Stack, traced: bool) -> None:
    """docs/tracing.md: a run's span starts at its tick's write; off, the token has no such field."""
    await add_job(stack.pool, "*/2 * * * * *")
    ticker = Ticker(stack.ledger, stack.publisher, lambda: stack.epoch, lookahead_s=0, stamp_written=traced)
    before = time.time()
    await ticker.run_once(T0 + timedelta(seconds=2.3))
    stream = RunStream(stack.redis, stack.keys)
    (entry,) = await stack.redis.xrange(stream.stream_key())
    raw = msgspec.msgpack.decode(entry[1][TOKEN_FIELD])
    if traced:
        assert before * 1000 - 1 <= raw["written_ms"] <= time.time() * 1000 + 1
    else:
        assert "written_ms" not in raw  # not encoded at all: no byte more per token


async def test_catch_up_after_a_gap_applies_each_misfire_policy(stack: Stack) -> None:
    ids = {
        policy: await add_job(stack.pool, "*/10 * * * * *", misfire_policy=policy, misfire_grace_s=35)
        for policy in ("run_all", "run_once", "skip")
    }
    ticker = stack.new_ticker()
    now = T0 + timedelta(seconds=100.5)
    result = await ticker.run_once(now)
    assert (result.queued, result.skipped) == (10 + 4 + 4, 0 + 6 + 6)
    ticks = [T0 + timedelta(seconds=s) for s in range(10, 101, 10)]
    for policy, job in ids.items():
        runs = await stack.runs(job)
        assert [r["scheduled_for"] for r in runs] == ticks, "every tick is a run or a recorded skip (G2)"
        ran = [r["scheduled_for"] for r in runs if r["state"] == "queued"]
        assert all(r["skip_reason"] == "misfired" for r in runs if r["state"] == "skipped")
        # Within the 35 s grace (70..100) every policy runs; the policy decides about 10..60 only.
        assert ran == {"run_all": ticks, "run_once": ticks[-4:], "skip": ticks[-4:]}[policy]
        assert await stack.cursor(job) == ticks[-1]
    # The late runs of the catch-up are spread out: pushed when their due time comes.
    await ticker.run_once(now + timedelta(seconds=1))
    queued_ids = sorted(r["id"] for r in await stack.runs() if r["state"] == "queued")
    assert sorted(t.run_id for t in await stack.tokens()) == queued_ids


async def test_paused_and_deleted_jobs_are_never_dispatched(stack: Stack) -> None:
    active = await add_job(stack.pool, "* * * * * *")
    paused = await add_job(stack.pool, "* * * * * *", status="paused")
    paused_later = await add_job(stack.pool, "* * * * * *")
    deleted_later = await add_job(stack.pool, "* * * * * *")
    ticker = stack.new_ticker()
    await ticker.run_once(T0)  # loads the schedule
    # Changed behind the leader's back (no notification yet): the ledger still refuses them.
    await stack.pool.execute("UPDATE jobs SET status = 'paused' WHERE id = $1", paused_later)
    await stack.pool.execute("DELETE FROM jobs WHERE id = $1", deleted_later)
    result = await ticker.run_once(T0 + timedelta(seconds=1))
    assert result.queued == 1
    assert {r["job_id"] for r in await stack.runs()} == {active}
    assert await stack.cursor(paused_later) == T0 and await stack.cursor(paused) == T0
    # Once notified, they leave the leader's schedule.
    ticker.notify(Change("paused", paused_later))
    ticker.notify(Change("deleted", deleted_later))
    await ticker.run_once(T0 + timedelta(seconds=2))
    assert paused_later not in ticker.book and deleted_later not in ticker.book
    assert {r["job_id"] for r in await stack.runs()} == {active}


async def test_listen_ops_update_the_schedule(stack: Stack) -> None:
    jobs = JobStore(stack.pool)
    ticker = stack.new_ticker()
    await ticker.run_once(T0)
    job_id = await add_job(stack.pool, "* * * * * *")
    ticker.notify(Change("created", job_id))
    await ticker.run_once(T0 + timedelta(seconds=1))
    assert job_id in ticker.book and len(await stack.runs(job_id)) == 1
    await jobs.set_status(job_id, "paused")
    ticker.notify(Change("paused", job_id))
    await ticker.run_once(T0 + timedelta(seconds=2))
    assert job_id not in ticker.book and len(await stack.runs(job_id)) == 1
    ticker.notify(Change("garbage"))  # unknown op: full resync, nothing breaks
    await ticker.run_once(T0 + timedelta(seconds=3))


async def test_manual_triggers_and_retries_are_pushed_when_due_and_only_once(stack: Stack) -> None:
    job = await add_job(stack.pool, "0 0 1 1 *")
    now = datetime.now(UTC)
    manual = await JobStore(stack.pool).trigger(job)
    retry_id = await stack.pool.fetchval(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at)"
        " VALUES ($1, $2, 2, 'retry', 'queued', $3) RETURNING id",
        job,
        now - timedelta(minutes=1),
        now + timedelta(seconds=5),
    )
    ticker = stack.new_ticker()
    await ticker.run_once(now + timedelta(seconds=0.5))
    assert [t.run_id for t in await stack.tokens()] == [manual.id]
    assert ticker.next_wake(now + timedelta(seconds=0.5)) <= now + timedelta(seconds=5)
    ticker.notify(Change("retry", job))
    await ticker.run_once(now + timedelta(seconds=5))
    await ticker.run_once(now + timedelta(seconds=6))
    tokens = await stack.tokens()
    assert [(t.run_id, t.attempt, t.trigger) for t in tokens] == [(retry_id, 2, "retry")]


async def test_repush_after_the_stream_is_deleted_and_on_election(stack: Stack) -> None:
    job = await add_job(stack.pool, "* * * * * *")
    ticker = stack.new_ticker()
    await ticker.run_once(T0 + timedelta(seconds=3.2))  # 1, 2 late (spread), 3 on time
    await ticker.run_once(T0 + timedelta(seconds=4.5))
    queued = sorted(r["id"] for r in await stack.runs(job) if r["state"] == "queued")
    assert len(queued) == 4
    await stack.redis.delete(stack.keys.stream)
    assert await stack.publisher.data_lost() == "stream or group missing"
    assert await stack.publisher.data_lost() is None  # recreated
    ticker.request_repush()
    await ticker.run_once(T0 + timedelta(seconds=4.6))
    assert sorted(t.run_id for t in await stack.tokens()) == queued
    # A new leader re-pushes every queued run on election.
    new_epoch = (await EpochStore(stack.pool).take("next-leader")).epoch
    successor = Ticker(stack.ledger, stack.publisher, lambda: new_epoch, resync_interval_s=3600, lookahead_s=0)
    result = await successor.run_once(T0 + timedelta(seconds=4.7))
    assert result.pushed == 4 and result.queued == 0


async def test_a_deposed_leader_writes_no_run_and_moves_no_cursor(stack: Stack) -> None:
    job = await add_job(stack.pool, "* * * * * *")
    ticker = stack.new_ticker()
    await ticker.run_once(T0)
    await EpochStore(stack.pool).take("usurper")  # another node won an election meanwhile
    with pytest.raises(NotLeader):
        await ticker.run_once(T0 + timedelta(seconds=5))
    assert await stack.runs(job) == []
    assert await stack.cursor(job) == T0
    assert await stack.tokens() == []


async def test_jittered_ticks_are_queued_on_time_and_pushed_a_lead_before_their_due_time(stack: Stack) -> None:
    job = await add_job(stack.pool, "* * * * * *", jitter_s=0.8)
    lead = timedelta(milliseconds=250)
    ticker = Ticker(
        stack.ledger, stack.publisher, lambda: stack.epoch, resync_interval_s=3600, lookahead_s=0, push_lead_ms=250
    )
    await ticker.run_once(T0 + timedelta(seconds=1))
    (run,) = await stack.runs(job)
    offset = run["due_at"] - run["scheduled_for"]
    assert timedelta(0) <= offset < timedelta(seconds=0.8)
    if offset > lead:
        assert await stack.tokens() == []
    await ticker.run_once(run["due_at"] - lead + timedelta(milliseconds=1))
    assert [(t.run_id, t.due_ms) for t in await stack.tokens()] == [(run["id"], _ms(run["due_at"]))]


@pytest.mark.parametrize("lead_ms", [0, 250, 1000])
async def test_by_default_ticks_are_written_their_push_lead_and_a_margin_ahead(stack: Stack, lead_ms: int) -> None:
    """Not a whole second: the write of the next second's ticks would land while the executors
    claim this second's."""
    job = await add_job(stack.pool, "*/5 * * * * *")
    ticker = Ticker(stack.ledger, stack.publisher, lambda: stack.epoch, resync_interval_s=3600, push_lead_ms=lead_ms)
    ahead = timedelta(milliseconds=lead_ms) + timedelta(seconds=WRITE_MARGIN_S)
    tick = T0 + timedelta(seconds=5)
    assert (await ticker.run_once(tick - ahead - timedelta(milliseconds=1))).queued == 0, "not yet"
    assert await stack.runs(job) == []
    assert (await ticker.run_once(tick - ahead)).queued == 1
    (run,) = await stack.runs(job)
    assert run["scheduled_for"] == tick
    assert ticker.outbox.next_push() == tick - timedelta(milliseconds=lead_ms), "written before its push time"


@pytest.mark.parametrize("lead_ms", [0, 250])
async def test_upcoming_ticks_are_written_ahead_and_pushed_a_lead_before_due(stack: Stack, lead_ms: int) -> None:
    job = await add_job(stack.pool, "*/5 * * * * *")
    ticker = Ticker(
        stack.ledger,
        stack.publisher,
        lambda: stack.epoch,
        resync_interval_s=3600,
        lookahead_s=1.0,
        push_lead_ms=lead_ms,
    )
    assert ticker.next_wake(T0) <= T0 + timedelta(seconds=4)  # wakes a lookahead before the tick
    early = await ticker.run_once(T0 + timedelta(seconds=4.2))
    assert (early.queued, early.pushed) == (1, 0), "in the ledger before it is due, not yet on the stream"
    (run,) = await stack.runs(job)
    assert (run["scheduled_for"], run["state"]) == (T0 + timedelta(seconds=5), "queued")
    assert await stack.cursor(job) == T0 + timedelta(seconds=5)
    push_at = T0 + timedelta(seconds=5, milliseconds=-lead_ms)
    assert ticker.outbox.next_push() == push_at
    assert await ticker.outbox.push_once(push_at - timedelta(milliseconds=1)) == 0
    assert await ticker.outbox.push_once(push_at) == 1
    tokens = await stack.tokens()
    assert [(t.run_id, t.scheduled_for_ms, t.due_ms) for t in tokens] == [(run["id"], _ms(T0) + 5000, _ms(T0) + 5000)]


def _ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


async def test_periodic_resync_catches_changes_whose_notification_was_lost(stack: Stack) -> None:
    kept = await add_job(stack.pool, "0 0 1 1 *")
    deleted = await add_job(stack.pool, "0 0 1 1 *")
    paused = await add_job(stack.pool, "0 0 1 1 *")
    ticker = Ticker(stack.ledger, stack.publisher, lambda: stack.epoch, resync_interval_s=30, lookahead_s=0)
    await ticker.run_once(T0)
    assert all(j in ticker.book for j in (kept, deleted, paused))
    # Written behind the leader's back, with no NOTIFY.
    created = await add_job(stack.pool, "0 0 1 1 *")
    await stack.pool.execute("DELETE FROM jobs WHERE id = $1", deleted)
    await stack.pool.execute("UPDATE jobs SET status = 'paused', updated_at = now() WHERE id = $1", paused)
    await ticker.run_once(T0 + timedelta(seconds=10))
    assert created not in ticker.book, "not before the resync is due"
    await ticker.run_once(T0 + timedelta(seconds=31))
    assert created in ticker.book and kept in ticker.book
    assert deleted not in ticker.book and paused not in ticker.book


async def test_redis_data_loss_is_noticed_from_the_marker_and_the_group(stack: Stack) -> None:
    assert await stack.publisher.data_lost() is None
    await stack.redis.delete(stack.keys.redis_marker)  # what a restart without persistence leaves
    assert await stack.publisher.data_lost() == "marker key missing"
    await stack.redis.xgroup_destroy(stack.keys.stream, stack.keys.group)
    assert await stack.publisher.data_lost() == "stream or group missing"
    assert await stack.publisher.data_lost() is None


async def test_a_run_written_ahead_is_not_pushed_once_its_job_is_paused(stack: Stack) -> None:
    job = await add_job(stack.pool, "*/5 * * * * *")
    ticker = Ticker(stack.ledger, stack.publisher, lambda: stack.epoch, resync_interval_s=3600, lookahead_s=1.0)
    await ticker.run_once(T0 + timedelta(seconds=4.2))
    await JobStore(stack.pool).set_status(job, "paused")
    ticker.notify(Change("paused", job))
    await ticker.run_once(T0 + timedelta(seconds=4.5))
    assert await ticker.outbox.push_once(T0 + timedelta(seconds=5)) == 0
    assert await stack.tokens() == []
    (run,) = await stack.runs(job)
    assert (run["state"], run["skip_reason"]) == ("skipped", "job paused or deleted")


async def test_a_redis_restart_is_noticed_from_its_run_id(stack: Stack) -> None:
    stack.publisher._run_id = "run-id-before-a-restart"
    assert await stack.publisher.data_lost() == "redis run_id changed"
    assert await stack.publisher.data_lost() is None


def _sample(name: str) -> float:
    return metrics.REGISTRY.get_sample_value(name) or 0.0


async def test_the_auditor_counts_a_tick_removed_behind_cronos_back(stack: Stack) -> None:
    job = await add_job(stack.pool, "*/5 * * * * *")
    await add_job(stack.pool, "* * * * * *", status="paused")  # not active: no tick expected
    ticker = stack.new_ticker()
    auditor = Auditor(stack.pool, interval_s=60, settle_s=0)
    await ticker.run_once(T0 + timedelta(seconds=60))
    unaccounted_before = _sample("cronos_ticks_unaccounted_total")
    expected_before = _sample("cronos_ticks_expected_total")

    clean = await auditor.once(T0 + timedelta(seconds=60))
    assert (clean.jobs, clean.expected, clean.unaccounted) == (1, 12, [])

    await ticker.run_once(T0 + timedelta(seconds=120))
    removed = T0 + timedelta(seconds=90)
    await stack.pool.execute("DELETE FROM runs WHERE job_id = $1 AND scheduled_for = $2", job, removed)
    result = await auditor.once(T0 + timedelta(seconds=120))
    assert result.window == (T0 + timedelta(seconds=60), T0 + timedelta(seconds=120)), "contiguous windows"
    assert (result.expected, result.unaccounted) == (12, [(job, removed)])
    assert _sample("cronos_ticks_unaccounted_total") - unaccounted_before == 1
    assert _sample("cronos_ticks_expected_total") - expected_before == 24


async def test_every_push_goes_to_the_stream_of_its_jobs_queue(stack: Stack) -> None:
    """Ticks, manual triggers and the re-push after an election go to the job's queue's stream,
    and the loss of that stream's group is noticed like the default one's."""
    plain = await add_job(stack.pool, "*/2 * * * * *")
    gpu = await add_job(stack.pool, "*/2 * * * * *")
    await stack.pool.execute("UPDATE jobs SET queue = 'gpu' WHERE id = $1", gpu)
    ticker = stack.new_ticker()
    await ticker.run_once(T0 + timedelta(seconds=2.3))
    gpu_stream = RunStream(stack.redis, stack.keys, queues=("gpu",))

    async def on_gpu() -> list[int]:
        found = await gpu_stream.read(f"reader-{next(_names)}", 1000, block_ms=None)
        return [d.token.job_id for d in found if d.token is not None]

    assert [t.job_id for t in await stack.tokens()] == [plain]
    assert await on_gpu() == [gpu]
    await JobStore(stack.pool).trigger(gpu)  # a manual run: pushed when due, by the due watcher
    due, _ = await stack.ledger.take(stack.epoch, datetime.now(UTC), datetime.now(UTC) + timedelta(seconds=1))
    assert await stack.publisher.publish(due, stack.epoch) == 1
    assert await on_gpu() == [gpu] and await stack.tokens() == []
    await stack.ledger.unmark(stack.epoch)  # as on an election
    runs, _ = await stack.ledger.take(stack.epoch, T0 + timedelta(seconds=3))
    assert sorted((r.job_id, r.queue) for r in runs) == [
        (plain, "default"),
        (gpu, "gpu"),
        (gpu, "gpu"),
    ]  # 2 ticks, 1 manual
    assert await stack.publisher.queues() == ["default", "gpu"]

    assert await stack.publisher.data_lost() is None
    await stack.redis.xgroup_destroy(stack.keys.queue_stream("gpu"), stack.keys.group)
    assert await stack.publisher.data_lost() == "stream or group missing (queue gpu)"
    assert await stack.publisher.data_lost() is None  # made again


async def test_an_unmark_pages_through_every_queued_run_in_short_fenced_statements(stack: Stack) -> None:
    """An election puts every queued run back in the outbox a page at a time (a statement over a
    backlog of 100,000s outlived the new leader's term): every page, none left marked, nothing else
    touched, and a page sent under an old epoch writes nothing."""
    job = await add_job(stack.pool, "* * * * * *", cursor=T0 - timedelta(seconds=8))
    written = await stack.new_ticker().run_once(T0 + timedelta(seconds=0.2))  # marked pushed as written
    assert written.queued == 8
    first = await stack.pool.fetchval("SELECT min(id) FROM runs WHERE job_id = $1", job)
    await stack.pool.execute("UPDATE runs SET state = 'running', node_id = 'n' WHERE id = $1", first)

    async def marked() -> int:
        return int(await stack.pool.fetchval("SELECT count(*) FROM runs WHERE pushed_epoch IS NOT NULL"))

    with pytest.raises(NotLeader):
        await stack.ledger.unmark(stack.epoch - 1, page=3)
    assert await marked() == 8
    assert await stack.ledger.unmark(stack.epoch, page=3) == 7  # pages of 3, 3, 1
    assert await marked() == 1  # the running run keeps its mark
    assert await stack.ledger.unmark(stack.epoch, page=3) == 0


async def test_a_repush_ends_ticks_late_beyond_their_grace_per_misfire_policy(stack: Stack) -> None:
    """Ticks written ahead whose tokens Redis lost are, when pushed again late beyond their grace,
    decided by the policy (G7): `skip` runs none, `run_once` only the newest, `run_all` every one."""
    now = datetime.now(UTC).replace(microsecond=0)
    cursor = now - timedelta(seconds=15)
    ids = {
        policy: await add_job(stack.pool, "* * * * * *", cursor=cursor, misfire_policy=policy, misfire_grace_s=5)
        for policy in ("run_all", "run_once", "skip")
    }
    written = await stack.new_ticker().run_once(cursor + timedelta(seconds=3.2))  # on time then
    assert (written.queued, written.skipped) == (9, 0)
    new_epoch = (await EpochStore(stack.pool).take("next-leader")).epoch  # its election's re-push, 12 s on
    await stack.ledger.unmark(new_epoch)
    runs, _ = await stack.ledger.take(new_epoch, now)
    pushed = {(r.job_id, r.scheduled_for_ms) for r in runs}
    newest = int((cursor + timedelta(seconds=3)).timestamp() * 1000)
    for policy, job in ids.items():
        rows = await stack.runs(job)
        ms = [int(r["scheduled_for"].timestamp() * 1000) for r in rows]
        expected_pushed = {"run_all": ms, "run_once": [newest], "skip": []}[policy]
        assert sorted(m for j, m in pushed if j == job) == expected_pushed, policy
        skipped = [int(r["scheduled_for"].timestamp() * 1000) for r in rows if r["state"] == "skipped"]
        assert skipped == [m for m in ms if m not in expected_pushed], policy
        assert all(r["skip_reason"] == "misfired" for r in rows if r["state"] == "skipped")
        # Those it keeps are due anew, now: neither a claim nor the reaper expires them.
        assert all(r["due_at"] >= now for r in rows if r["state"] == "queued"), policy


async def test_a_new_leaders_catch_up_and_its_repush_run_one_tick_for_a_misfire_under_run_once(stack: Stack) -> None:
    """The double run the last release had: ticks written ahead, then Redis lost their tokens and
    the leader was away past their grace. The new leader first writes its catch-up (whose newest
    tick runs under run_once), then judges the ticks written ahead: they are older than the job's
    newest written tick now, so they end misfired. Before, the re-push came first, kept the newest
    tick written ahead (the newest at that time) and the catch-up ran its own newest too."""
    now = datetime.now(UTC).replace(microsecond=0)
    now -= timedelta(seconds=now.second % 10)  # on a tick of the job's (*/10 s) schedule
    cursor = now - timedelta(seconds=30)
    job = await add_job(stack.pool, "*/10 * * * * *", cursor=cursor, misfire_policy="run_once", misfire_grace_s=2)
    ahead = stack.new_ticker()
    await ahead.run_once(cursor + timedelta(seconds=10.2))  # the tick at +10 s written, on time then
    assert [r["state"] for r in await stack.runs(job)] == ["queued"]
    new_epoch = (await EpochStore(stack.pool).take("next-leader")).epoch
    leader = Ticker(stack.ledger, stack.publisher, lambda: new_epoch, resync_interval_s=3600, lookahead_s=0)
    await leader.run_once(now + timedelta(seconds=5))  # +20 s and +30 s are due now, all past their grace
    rows = await stack.runs(job)
    late = [r for r in rows if r["scheduled_for"] < now + timedelta(seconds=3)]
    assert [r["state"] for r in late if r["state"] != "skipped"] == ["queued"], "one run for the misfire"
    assert max(late, key=lambda r: r["scheduled_for"])["state"] == "queued"  # the newest stands for the lot
    assert {r["skip_reason"] for r in late if r["state"] == "skipped"} == {"misfired"}


async def _pending(stack: Stack, job: int) -> list[asyncpg.Record]:
    return [r for r in await stack.runs(job) if r["state"] in ("queued", "waiting")]


async def test_a_job_of_the_default_policies_holds_one_pending_run(stack: Stack) -> None:
    """G8 (issue 38): while a run_once + forbid job's run is overdue (more than 3 s) and not started
    (a cluster offered more than it runs), its next ticks are written skipped SKIP_PENDING (each
    tick still accounted for, G2) instead of queued behind it; once it starts, the next tick is
    queued again. A run past its grace holds nothing back, and the other policies keep every tick.
    Before, every tick was queued: 7 pending runs each here, and a backlog that grew with the load."""
    held = await add_job(stack.pool, "* * * * * *", misfire_policy="run_once")  # forbid: the column's default
    every = await add_job(stack.pool, "* * * * * *", misfire_policy="run_all")
    short = await add_job(stack.pool, "* * * * * *", misfire_policy="run_once", misfire_grace_s=4)
    ticker = stack.new_ticker()
    for s in range(1, 8):  # nothing claims the runs
        await ticker.run_once(T0 + timedelta(seconds=s + 0.2))
    rows = await stack.runs(held)
    # +1 is overdue by more than 3 s from +4.2 on: +2 and +3 were queued before that, +4 to +7 held.
    assert [(r["state"], r["skip_reason"]) for r in rows] == [("queued", None)] * 3 + [("skipped", SKIP_PENDING)] * 4
    assert len(await _pending(stack, every)) == 7
    # The grace-4 job's +1, +2, +3 hold back +4, +5, +6; at +7.2 its pending ones are past their grace.
    short_pending = [r["scheduled_for"] for r in await _pending(stack, short)]
    assert short_pending == [T0 + timedelta(seconds=s) for s in (1, 2, 3, 7)]

    await stack.pool.execute(
        "UPDATE runs SET state = 'completed', started_at = $2, finished_at = $2 WHERE id = ANY($1::bigint[])",
        [r["id"] for r in rows if r["state"] == "queued"],
        T0 + timedelta(seconds=7.5),
    )
    await ticker.run_once(T0 + timedelta(seconds=8.2))
    assert [r["scheduled_for"] for r in await _pending(stack, held)] == [T0 + timedelta(seconds=8)]


async def test_a_waiting_run_holds_its_job_s_ticks_back_as_a_queued_one_does(stack: Stack) -> None:
    """The tick write probes each job only when some run not started is overdue at all (TICKS_WRITE's
    `o`, in runs_queued_due_id and runs_waiting_job): an overdue waiting run, with no queued
    run overdue anywhere, still holds its job's next ticks back."""
    job = await add_job(stack.pool, "* * * * * *", misfire_policy="run_once")  # forbid: the column's default
    ticker = stack.new_ticker()
    await ticker.run_once(T0 + timedelta(seconds=1.2))
    await stack.pool.execute("UPDATE runs SET state = 'waiting', pushed_epoch = NULL WHERE job_id = $1", job)
    for s in range(2, 7):
        await ticker.run_once(T0 + timedelta(seconds=s + 0.2))
    rows = await stack.runs(job)
    assert [(r["state"], r["skip_reason"]) for r in rows] == (
        [("waiting", None)] + [("queued", None)] * 2 + [("skipped", SKIP_PENDING)] * 3
    ), "+1 is overdue by more than 3 s from +4.2 on: +4 to +6 held"
    queued = [r["id"] for r in rows if r["state"] == "queued"]
    await stack.pool.execute(
        "UPDATE runs SET state = 'skipped', skip_reason = 'misfired', finished_at = now() WHERE id = ANY($1::bigint[])",
        queued,
    )
    await ticker.run_once(T0 + timedelta(seconds=7.2))  # the waiting run alone is overdue now
    assert (await stack.runs(job))[-1]["skip_reason"] == SKIP_PENDING
