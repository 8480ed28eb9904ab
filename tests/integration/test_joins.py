"""Failure paths and joins (issue 40, item 5) in the store: a finish fires a child's edges on its
parents' final outcomes, a join runs its child once per logical tick after every parent, skips it
with the reason when a parent ends without firing its edge, and the leader decides a join past its
deadline (run or skip, with the reason). Against real PostgreSQL; the API's checks at the end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

from cronos.errors import NotLeader
from cronos.models import Chain, ChainJoin
from cronos.settings import Settings
from cronos.store.joins import JoinStore
from cronos.store.runs import ClaimedRun, Outcome, RunStore
from tests.integration.api_client import running_api
from tests.integration.ledger_helpers import insert_job, insert_run, runs_of, set_epoch, tick

pytestmark = pytest.mark.timeout(60)


async def _child(pool: asyncpg.Pool, parents: list[int], chain: Chain | None) -> int:
    child = await insert_job(pool)
    await pool.execute(
        "UPDATE jobs SET parents = $2, chain = $3 WHERE id = $1",
        child, parents, None if chain is None else msgspec.to_builtins(chain),
    )  # fmt: skip
    return child


async def _end(pool: asyncpg.Pool, job: int, at: datetime, state: str, retry_delay_s: float | None = None) -> int:
    """A run of `job` at tick `at`, claimed and ended as `state`; its id."""
    store = RunStore(pool)
    token = await insert_run(pool, job, at)
    assert isinstance((await store.claim([token.run_id], "n1", 30))[0], ClaimedRun)
    outcome = Outcome(run_id=token.run_id, node_id="n1", state=state, retry_delay_s=retry_delay_s)  # type: ignore[arg-type]
    assert (await store.finish([outcome])).written == {token.run_id}
    return token.run_id


def _join(on_timeout: str = "skip", timeout_s: float = 3600, on: dict[str, str] | None = None) -> Chain:
    return Chain(on=on or {}, join=ChainJoin(timeout_s=timeout_s, on_timeout=on_timeout))  # type: ignore[arg-type]


async def _summary(pool: asyncpg.Pool, job: int) -> list[tuple[Any, ...]]:
    return [(r.trigger, r.state, r.scheduled_for, r.parent_run_id, r.skip_reason) for r in await runs_of(pool, job)]


async def test_a_failed_parent_starts_its_failed_child_after_its_last_attempt_only(pg_pool: asyncpg.Pool) -> None:
    parent = await insert_job(pg_pool)
    on_failure = await _child(pg_pool, [parent], Chain(on={str(parent): "failed"}))
    on_success = await _child(pg_pool, [parent], None)
    on_any = await _child(pg_pool, [parent], Chain(on={str(parent): "ended"}))
    await _end(pg_pool, parent, tick(1), "failed", retry_delay_s=5)  # a retry left: the tick goes on
    assert await runs_of(pg_pool, on_failure) == []
    last = await _end(pg_pool, parent, tick(2), "failed")
    assert [(r.trigger, r.state, r.parent_run_id) for r in await runs_of(pg_pool, on_failure)] == [
        ("chain", "queued", last)
    ]
    assert await runs_of(pg_pool, on_success) == [], "today's edge: a failed parent starts nothing"
    done = await _end(pg_pool, parent, tick(3), "completed")
    assert [r.parent_run_id for r in await runs_of(pg_pool, on_any)] == [last, done]
    assert [r.parent_run_id for r in await runs_of(pg_pool, on_success)] == [done]
    assert len(await runs_of(pg_pool, on_failure)) == 1


async def test_a_two_parent_join_runs_its_child_once_per_tick_after_both(pg_pool: asyncpg.Pool) -> None:
    a, b = await insert_job(pg_pool), await insert_job(pg_pool)
    child = await _child(pg_pool, [a, b], _join())
    await _end(pg_pool, a, tick(1), "completed")
    await _end(pg_pool, a, tick(2), "completed")
    assert await runs_of(pg_pool, child) == [], "b has not ended ticks 1 and 2"
    last = await _end(pg_pool, b, tick(1), "completed")
    assert await _summary(pg_pool, child) == [("chain", "queued", tick(1), last, None)]
    joins = await JoinStore(pg_pool).of_job(child, 10)
    assert [(j.tick, j.decided, j.parents, j.outcomes) for j in joins] == [
        (tick(2), None, [a], ["completed"]),
        (tick(1), "ran", [a, b], ["completed", "completed"]),
    ]
    assert joins[1].run_id == (await runs_of(pg_pool, child))[0].id


async def test_a_join_skips_at_once_with_the_reason_when_a_parent_ends_without_firing(pg_pool: asyncpg.Pool) -> None:
    a, b = await insert_job(pg_pool), await insert_job(pg_pool)
    child = await _child(pg_pool, [a, b], _join())
    failed = await _end(pg_pool, b, tick(1), "failed")
    reason = f"parent {b} ended failed; its edge waits for completed"
    assert await _summary(pg_pool, child) == [("chain", "skipped", tick(1), failed, reason)]
    await _end(pg_pool, a, tick(1), "completed")
    assert len(await runs_of(pg_pool, child)) == 1, "a decided join takes no more arrivals"


async def test_parents_ending_together_in_one_finish_make_one_join_run(pg_pool: asyncpg.Pool) -> None:
    a, b = await insert_job(pg_pool), await insert_job(pg_pool)
    child = await _child(pg_pool, [a, b], _join(on={str(b): "ended"}))
    store = RunStore(pg_pool)
    tokens = [await insert_run(pg_pool, job, tick(1)) for job in (a, b)]
    await store.claim([t.run_id for t in tokens], "n1", 30)
    outcomes = [Outcome(run_id=tokens[0].run_id, node_id="n1", state="completed"),
                Outcome(run_id=tokens[1].run_id, node_id="n1", state="failed")]  # fmt: skip
    assert (await store.finish(outcomes)).chained == 1
    assert [(r.state, r.scheduled_for) for r in await runs_of(pg_pool, child)] == [("queued", tick(1))]


@pytest.mark.parametrize(("on_timeout", "state"), [("run", "queued"), ("skip", "skipped")])
async def test_the_leader_decides_a_join_past_its_deadline(pg_pool: asyncpg.Pool, on_timeout: str, state: str) -> None:
    a, b = await insert_job(pg_pool), await insert_job(pg_pool)
    child = await _child(pg_pool, [a, b], _join(on_timeout=on_timeout, timeout_s=1))
    arrived = await _end(pg_pool, a, tick(1), "completed")
    store = JoinStore(pg_pool)
    await set_epoch(pg_pool, 7)
    now = datetime.now(UTC)
    await pg_pool.execute("UPDATE chain_joins SET deadline = now() + interval '1 hour' WHERE child_id = $1", child)
    assert await store.decide_due(7, 10, now) == 0, "not due yet"
    await pg_pool.execute("UPDATE chain_joins SET deadline = now() - interval '1 second' WHERE child_id = $1", child)
    assert await store.next_deadline() is not None
    with pytest.raises(NotLeader):
        await store.decide_due(6, 10, now)
    assert await runs_of(pg_pool, child) == []
    assert await store.decide_due(7, 10, now) == 1
    reason = f"join timed out after 1 s waiting for parent(s) {b}"
    runs = await runs_of(pg_pool, child)
    assert [(r.state, r.scheduled_for, r.parent_run_id) for r in runs] == [(state, tick(1), arrived)]
    assert runs[0].skip_reason == (reason if state == "skipped" else None)
    (join,) = await store.of_job(child, 10)
    assert (join.decided, join.reason, join.run_id) == ("ran" if state == "queued" else "skipped", reason, runs[0].id)
    assert await store.next_deadline() is None
    await _end(pg_pool, b, tick(1), "completed")
    assert len(await runs_of(pg_pool, child)) == 1, "exactly one child run per (child, tick)"
    assert await store.forget(7, now - timedelta(hours=1), 10) == 0, "decided after that"
    assert await store.forget(7, datetime.now(UTC) + timedelta(seconds=5), 10) == 1
    assert await store.of_job(child, 10) == []


async def test_a_paused_childs_timed_out_join_is_dropped_without_a_run(pg_pool: asyncpg.Pool) -> None:
    a, b = await insert_job(pg_pool), await insert_job(pg_pool)
    child = await _child(pg_pool, [a, b], _join(timeout_s=1))
    await _end(pg_pool, a, tick(1), "completed")
    await pg_pool.execute("UPDATE jobs SET status = 'paused' WHERE id = $1", child)
    await pg_pool.execute("UPDATE chain_joins SET deadline = now() - interval '1 second'")
    await set_epoch(pg_pool, 3)
    assert await JoinStore(pg_pool).decide_due(3, 10, datetime.now(UTC) + timedelta(seconds=1)) == 1
    assert await runs_of(pg_pool, child) == []
    assert [(j.decided, j.reason) for j in await JoinStore(pg_pool).of_job(child, 10)] == [
        ("dropped", "the child job is not active")
    ]


async def test_the_api_takes_chain_and_refuses_an_edge_of_a_job_that_is_no_parent(settings: Settings) -> None:
    async with running_api(settings) as api:
        base = {"cron_expression": "@never", "payload": {"action": "noop"}}
        a = (await api.create(name="a", **base))["id"]
        plain = await api.create(name="plain", **base, parents=[a])
        assert plain["chain"] is None and plain["parents"] == [a], "without chain: today's chain"
        chain = {"on": {str(a): "failed"}, "join": {"timeout_s": 60, "on_timeout": "run"}}
        created = await api.create(name="child", **base, parents=[a], chain=chain)
        assert created["chain"] == chain
        reply = await api.call(
            "POST", "/api/jobs", json={"name": "bad", **base, "parents": [a], "chain": {"on": {"99": "ended"}}}
        )
        assert reply.status == 422 and "$.chain.on" in reply.body["detail"], reply.body
        reply = await api.call(
            "POST", "/api/jobs", json={"name": "bad", **base, "chain": {"on": {}, "join": {"timeout_s": 0}}}
        )
        assert reply.status == 422 and "$.chain.join.timeout_s" in reply.body["detail"], reply.body
        reply = await api.call("PATCH", f"/api/jobs/{created['id']}", json={"parents": []})
        assert reply.status == 422 and "$.chain" in reply.body["detail"], "the edge names a parent no more"
        reply = await api.call("PATCH", f"/api/jobs/{created['id']}", json={"chain": {"on": {str(a): "ended"}}})
        assert reply.status == 200 and reply.body["chain"] == {"on": {str(a): "ended"}}, reply.body
        revisions = (await api.call("GET", f"/api/jobs/{created['id']}/revisions")).body["items"]
        assert revisions[0]["changes"] == {"chain": {"on": {str(a): "ended"}}}


async def test_the_joins_route_explains_each_child_run_by_its_parents_runs(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(settings) as api:
        base = {"cron_expression": "@never", "payload": {"action": "noop"}}
        a, b = (await api.create(name="a", **base))["id"], (await api.create(name="b", **base))["id"]
        child = await api.create(name="c", **base, parents=[a, b], chain={"join": {"timeout_s": 600}})
        ends = [await _end(pg_pool, a, tick(1), "completed"), await _end(pg_pool, b, tick(1), "completed")]
        reply = await api.call("GET", f"/api/jobs/{child['id']}/joins")
        assert reply.status == 200, reply.body
        (join,) = reply.body["items"]
        (run,) = await runs_of(pg_pool, child["id"])
        assert (join["parents"], join["runs"], join["outcomes"]) == ([a, b], ends, ["completed", "completed"])
        assert (join["decided"], join["run_id"], join["reason"]) == ("ran", run.id, None)
        assert (await api.call("GET", "/api/jobs/999999/joins")).status == 404
        assert (await api.call("GET", f"/api/jobs/{a}/joins?limit=0")).status == 422
