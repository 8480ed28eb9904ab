"""Chains (issue 14 item 8), through the API with a real dispatcher, executor and HTTP target: a
child runs after each successful run of each parent, exactly once, recording the parent run; a
failed parent run starts nothing; cycles, unknown parents and the deletion of a parent are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from cronos.lifecycle import PENDING
from cronos.models import RunState
from cronos.settings import Settings
from cronos.store.runs import ClaimedRun, Outcome, RunStore
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.cluster.receiver import Receiver
from tests.integration.api_client import Api, running_api
from tests.integration.ledger_helpers import insert_job, insert_run, runs_of, tick
from tests.integration.test_api_revisions import _roles
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

PENDING_OR_RUNNING = {s.value for s in PENDING | {RunState.RUNNING}}  # not ended yet


@dataclass
class Stack:
    api: Api
    receiver: Receiver

    async def job(self, name: str, expression: str = "@never", **fields: Any) -> int:
        payload = {"url": self.receiver.url(f"/{name}"), "method": "POST"}
        if "expect_status" in fields:
            payload["expect_status"] = fields.pop("expect_status")
        job = await self.api.create(name=name, cron_expression=expression, kind="http", payload=payload, **fields)
        return int(job["id"])

    async def runs(self, job_id: int) -> list[dict[str, Any]]:
        reply = await self.api.call("GET", f"/api/jobs/{job_id}/runs?limit=500")
        assert reply.status == 200, reply.body
        return list(reply.body["items"])

    async def ids(self, job_id: int, state: str) -> set[int]:
        return {r["id"] for r in await self.runs(job_id) if r["state"] == state}

    async def settled(self, job_id: int) -> bool:
        """No run of the job is queued or running."""
        return not any(r["state"] in PENDING_OR_RUNNING for r in await self.runs(job_id))

    async def pause(self, job_id: int) -> None:
        reply = await self.api.call("POST", f"/api/jobs/{job_id}/pause")
        assert reply.status == 200, reply.body
        await wait_for(lambda: self.settled(job_id), timeout=20, what=f"job {job_id}'s runs to end")

    async def chain_runs_match(self, child: int, parents: list[int]) -> list[dict[str, Any]] | None:
        """The child's runs once there is one per completed parent run and all have ended."""
        expected = set().union(*[await self.ids(p, "completed") for p in parents])
        runs = await self.runs(child)
        done = [r for r in runs if r["state"] not in PENDING_OR_RUNNING]
        return runs if len(done) == len(runs) and len(runs) >= len(expected) > 0 else None


@pytest.fixture
async def stack(settings: Settings, pg_pool: asyncpg.Pool) -> AsyncIterator[Stack]:
    receiver = Receiver()
    receiver.start()
    try:
        async with running_api(settings) as api, _roles(Dispatcher(settings), Executor(settings)):
            yield Stack(api, receiver)
    finally:
        receiver.stop()


def _parents_of(runs: list[dict[str, Any]]) -> list[int]:
    return sorted(r["parent_run_id"] for r in runs)


async def test_the_child_runs_once_after_each_successful_run_of_its_parent(stack: Stack) -> None:
    a = await stack.job("a", "* * * * * *")
    b = await stack.job("b", parents=[a])
    job_b = (await stack.api.call("GET", f"/api/jobs/{b}")).body
    assert (job_b["parents"], job_b["next_run_at"]) == ([a], None), "@never: runs only after its parent"

    await wait_for(lambda: _at_least(stack.ids(a, "completed"), 3), timeout=30, what="three runs of a")
    await stack.pause(a)
    runs = await wait_for(lambda: stack.chain_runs_match(b, [a]), timeout=20, what="b's chain runs")

    completed_a = await stack.ids(a, "completed")
    assert _parents_of(runs) == sorted(completed_a), "one run of b per completed run of a, none more"
    assert {(r["trigger"], r["state"], r["attempt"]) for r in runs} == {("chain", "completed", 1)}
    assert len([d for d in stack.receiver.deliveries() if d.path == "/b"]) == len(runs)
    for run in runs:  # each starts after its parent run ended
        parent = (await stack.api.call("GET", f"/api/runs/{run['parent_run_id']}")).body
        assert parent["job_id"] == a and run["scheduled_for"] >= parent["finished_at"], (run, parent)
        assert run["started_at"] >= parent["finished_at"]


async def test_a_failed_parent_run_starts_no_child_run(stack: Stack) -> None:
    a = await stack.job("a", "* * * * * *", expect_status=[201])  # the target answers 200: every run fails
    b = await stack.job("b", parents=[a])
    await wait_for(lambda: _at_least(stack.ids(a, "failed"), 3), timeout=30, what="three failed runs of a")
    assert await stack.runs(b) == [], "no child run after a failed parent run"

    # The control: once a succeeds, b runs, after its successful runs only.
    fixed = {"url": stack.receiver.url("/a"), "method": "POST"}
    assert (await stack.api.call("PATCH", f"/api/jobs/{a}", json={"payload": fixed})).status == 200
    await wait_for(lambda: _at_least(stack.ids(a, "completed"), 2), timeout=30, what="a succeeding")
    await stack.pause(a)
    runs = await wait_for(lambda: stack.chain_runs_match(b, [a]), timeout=20, what="b's chain runs")
    assert _parents_of(runs) == sorted(await stack.ids(a, "completed"))
    assert not set(_parents_of(runs)) & await stack.ids(a, "failed")


async def test_a_diamond_runs_the_join_after_each_of_its_parents(stack: Stack) -> None:
    a = await stack.job("a", "* * * * * *")
    b = await stack.job("b", parents=[a])
    c = await stack.job("c", parents=[a])
    # B and C finish together: D's second run waits for its first (a skip would be the policy's).
    d = await stack.job("d", parents=[b, c], concurrency_policy="buffer_all")

    await wait_for(lambda: _at_least(stack.ids(a, "completed"), 2), timeout=30, what="two runs of a")
    await stack.pause(a)
    for child in (b, c):
        await wait_for(lambda job=child: stack.chain_runs_match(job, [a]), timeout=20, what=f"job {child}'s runs")
    runs = await wait_for(lambda: stack.chain_runs_match(d, [b, c]), timeout=20, what="d's chain runs")

    from_b, from_c = await stack.ids(b, "completed"), await stack.ids(c, "completed")
    assert len(from_b) == len(from_c) == len(await stack.ids(a, "completed"))
    assert _parents_of(runs) == sorted(from_b | from_c), "one run of d after each run of b and each of c"
    assert {r["state"] for r in runs} == {"completed"}


async def test_cycles_unknown_parents_and_deleting_a_parent_are_refused(stack: Stack) -> None:
    a = await stack.job("a")
    b = await stack.job("b", parents=[a])
    c = await stack.job("c", parents=[b])

    reply = await stack.api.call("PATCH", f"/api/jobs/{a}", json={"parents": [c]})
    assert (reply.status, reply.body["field"]) == (422, "$.parents"), reply.body
    assert f"{a} (a) -> {b} (b) -> {c} (c) -> {a} (a)" in reply.body["detail"], reply.body
    reply = await stack.api.call("PATCH", f"/api/jobs/{a}", json={"parents": [a]})
    assert (reply.status, reply.body["field"]) == (422, "$.parents"), reply.body
    assert "cycle" in reply.body["detail"]
    assert (await stack.api.call("GET", f"/api/jobs/{a}")).body["parents"] == [], "nothing written"

    for parents, why in (([987654], "no job 987654"), ([a, a], "twice"), ([0], "")):
        reply = await stack.api.call("POST", "/api/jobs", json={
            "name": "x", "cron_expression": "@never", "payload": {"action": "x"}, "parents": parents,
        })  # fmt: skip
        assert (reply.status, reply.body["field"].startswith("$.parents")) == (422, True), reply.body
        assert why in reply.body["detail"]

    reply = await stack.api.call("DELETE", f"/api/jobs/{b}")
    assert reply.status == 409 and f"{c} (c)" in reply.body["detail"], reply.body
    assert (await stack.api.call("PATCH", f"/api/jobs/{c}", json={"parents": [a]})).status == 200
    assert (await stack.api.call("DELETE", f"/api/jobs/{b}")).status == 204, "no child any more"
    revisions = (await stack.api.call("GET", f"/api/jobs/{c}/revisions")).body["items"]
    assert revisions[0]["changes"] == {"parents": [a]}, "a change of parents is a revision"


async def _at_least(found: Any, n: int) -> bool:
    return len(await found) >= n


async def test_the_finish_queues_chain_runs_in_its_own_statement_once_per_parent_run(pg_pool: asyncpg.Pool) -> None:
    """Two parents of one child finishing in one batch: two chain runs, a ms apart (distinct lock
    keys), committed with the outcomes; a repeated finish adds none; a failed chain run's retry keeps
    its parent run."""
    store = RunStore(pg_pool)
    b, c = await insert_job(pg_pool), await insert_job(pg_pool)
    d = await insert_job(pg_pool, max_retries=1)
    await pg_pool.execute("UPDATE jobs SET parents = $2 WHERE id = $1", d, [b, c])
    tokens = [await insert_run(pg_pool, job, tick(1)) for job in (b, c)]
    claimed = await store.claim([t.run_id for t in tokens], "n1", 30)
    assert all(isinstance(run, ClaimedRun) for run in claimed)
    outcomes = [Outcome(run_id=t.run_id, node_id="n1", state="completed") for t in tokens]

    finished = await store.finish(outcomes)
    assert (finished.written, finished.chained) == ({t.run_id for t in tokens}, 2)
    assert (await store.finish(outcomes)).chained == 0, "a run finishes once: its children are queued once"
    runs = sorted(await runs_of(pg_pool, d), key=lambda r: r.scheduled_for)
    assert [(r.trigger, r.state, r.parent_run_id) for r in runs] == [
        ("chain", "queued", tokens[0].run_id), ("chain", "queued", tokens[1].run_id),
    ]  # fmt: skip
    assert runs[1].scheduled_for - runs[0].scheduled_for >= timedelta(milliseconds=1)
    ends = {r["id"]: r["finished_at"] for r in await pg_pool.fetch("SELECT id, finished_at FROM runs")}
    assert runs[0].scheduled_for == ends[tokens[0].run_id] and runs[0].due_at == runs[0].scheduled_for

    first = runs[0]
    assert isinstance((await store.claim([first.id], "n1", 30))[0], ClaimedRun)
    failed = Outcome(run_id=first.id, node_id="n1", state="failed", error="boom", retry_delay_s=0)
    assert (await store.finish([failed])).retried == 1
    retry = [r for r in await runs_of(pg_pool, d) if r.attempt == 2]
    assert [(r.trigger, r.parent_run_id, r.scheduled_for) for r in retry] == [
        ("retry", tokens[0].run_id, first.scheduled_for)
    ]
