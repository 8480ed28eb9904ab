"""Joins as a state machine (issue 40, item 5): random interleavings of parents ending their ticks
(one by one, in one finish, or in two concurrent finishes), failures with a retry left, and the
leader's timeout sweep, driven through the real store against PostgreSQL beside a model of every
join's arrivals. After every step: exactly one child run per (child, logical tick) once its join
decided and none before (whatever the interleaving), its state what the arrivals say (queued when
every parent fired its edge, skipped when one ended without firing it, the timeout's choice), a
join that only arrivals of final outcomes reach, and an edge without a join: one run per firing end.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec
import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from cronos import chains
from cronos.models import Chain, ChainJoin, ChainOn, RunState
from cronos.store.db import connect
from cronos.store.joins import JoinStore
from cronos.store.runs import ClaimedRun, Outcome, RunStore
from tests.integration.ledger_helpers import BASE, insert_job, insert_run, set_epoch

TICKS = 3
ENDS = ("completed", "failed", "retried", "cancelled")  # retried: failed with a retry left (not final)
EPOCH = 1


def tick(n: int) -> datetime:
    return BASE + timedelta(minutes=n)


@dataclass
class Child:
    id: int
    parents: list[int]
    chain: Chain


@dataclass
class JoinModel:
    # (parent, final outcome) in commit order; None: the leader's sweep found it past its deadline
    events: list[tuple[int, RunState] | None] = field(default_factory=list)


@dataclass
class World:
    loop: asyncio.AbstractEventLoop
    pool: asyncpg.Pool


class JoinMachine(RuleBasedStateMachine):
    world: World | None = None

    def __init__(self) -> None:
        super().__init__()
        assert self.world is not None
        self.loop, self.pool = self.world.loop, self.world.pool
        self.store, self.joins = RunStore(self.pool), JoinStore(self.pool)
        self.parents: list[int] = []
        self.children: list[Child] = []
        self.edge_child = 0  # parents [p0], on ended, no join
        self.model: dict[tuple[int, datetime], JoinModel] = defaultdict(JoinModel)
        self.final: set[tuple[int, datetime]] = set()  # (parent, tick) ended for good
        self.fired_edge = 0  # final ends of p0: runs the edge child must have

    def run(self, aw: object) -> object:
        return self.loop.run_until_complete(aw)  # type: ignore[arg-type]

    @initialize()
    def jobs(self) -> None:
        async def make() -> None:
            self.parents = [await insert_job(self.pool, concurrency_policy="allow") for _ in range(3)]
            p0, p1, p2 = self.parents
            shapes: list[tuple[list[int], dict[str, ChainOn], str]] = [
                ([p0, p1], {}, "skip"),
                ([p0, p1, p2], {str(p1): "failed", str(p2): "ended"}, "run"),
            ]
            for parents, on, on_timeout in shapes:
                chain = Chain(on=on, join=ChainJoin(timeout_s=3600, on_timeout=on_timeout))  # type: ignore[arg-type]
                self.children.append(Child(await self._child(parents, chain), parents, chain))
            self.edge_child = await self._child([p0], Chain(on={str(p0): "ended"}))
            await set_epoch(self.pool, EPOCH)

        self.run(make())

    async def _child(self, parents: list[int], chain: Chain) -> int:
        child = await insert_job(self.pool)
        await self.pool.execute(
            "UPDATE jobs SET parents = $2, chain = $3 WHERE id = $1", child, parents, msgspec.to_builtins(chain)
        )
        return child

    async def _claimed(self, parent: int, at: datetime) -> int:
        """The parent's next attempt of tick `at` (its queued retry, else a new run), claimed."""
        run_id = await self.pool.fetchval(
            "SELECT id FROM runs WHERE job_id = $1 AND scheduled_for = $2 AND state = 'queued'", parent, at
        )
        if run_id is None:
            attempt = await self.pool.fetchval(
                "SELECT coalesce(max(attempt), 0) + 1 FROM runs WHERE job_id = $1 AND scheduled_for = $2", parent, at
            )
            run_id = (await insert_run(self.pool, parent, at, attempt=attempt)).run_id
        assert isinstance((await self.store.claim([run_id], "n1", 60))[0], ClaimedRun)
        return int(run_id)

    def _arrive(self, parent: int, at: datetime, end: str) -> None:
        """The model: a parent's end of a tick (a final one reaches its children)."""
        if end == "retried":
            return
        self.final.add((parent, at))
        state = RunState(end)
        for child in self.children:
            if parent in child.parents:
                self.model[(child.id, at)].events.append((parent, state))
        if parent == self.parents[0]:
            self.fired_edge += 1

    @rule(
        data=st.data(),
        n=st.integers(0, TICKS - 1),
        ends=st.lists(st.sampled_from(ENDS), min_size=1, max_size=2),
        together=st.booleans(),
    )
    def end(self, data: st.DataObject, n: int, ends: list[str], together: bool) -> None:
        """One or two parents end tick n (two: in one finish, or in two concurrent finishes)."""
        at = tick(n)
        open_ = [p for p in self.parents if (p, at) not in self.final]
        if not open_:
            return
        chosen = data.draw(st.lists(st.sampled_from(open_), min_size=1, max_size=len(ends), unique=True))
        outcomes = []
        for parent, end in zip(chosen, ends, strict=False):
            run_id = self.run(self._claimed(parent, at))
            state = "failed" if end == "retried" else end
            outcomes.append(
                Outcome(run_id=run_id, node_id="n1", state=state, retry_delay_s=1e8 if end == "retried" else None)
            )  # type: ignore[arg-type]
            self._arrive(parent, at, end)
        if together or len(outcomes) == 1:
            self.run(self.store.finish(outcomes))
        else:

            async def apart() -> None:
                await asyncio.gather(*(self.store.finish([o]) for o in outcomes))

            self.run(apart())

    @rule(data=st.data())
    def time_out(self, data: st.DataObject) -> None:
        """A pending join's deadline passes; the leader's sweep decides it."""
        pending = [key for key, join in self.model.items() if self._decision(key)[0] is None and join.events]
        if not pending:
            return
        key = data.draw(st.sampled_from(sorted(pending)))
        self.run(self.pool.execute(
            "UPDATE chain_joins SET deadline = now() - interval '1 second' WHERE child_id = $1 AND tick = $2", *key
        ))  # fmt: skip
        self.model[key].events.append(None)
        assert self.run(self.joins.decide_due(EPOCH, 100, datetime.now(UTC))) == 1

    def _decision(self, key: tuple[int, datetime]) -> tuple[str | None, str | None]:
        """The model's: the run's state once decided (None: waiting), and the reason's start. Told
        without cronos.chains.decide: in commit order, the first arrival that settles it settles it."""
        child = next(c for c in self.children if c.id == key[0])
        assert child.chain.join is not None
        latest: dict[int, RunState] = {}
        for event in self.model[key].events:
            if event is None:
                return ("queued" if child.chain.join.on_timeout == "run" else "skipped"), "join timed out"
            parent, state = event
            latest[parent] = state
            if not chains.fires(chains.edge_on(child.chain, parent), state):
                return "skipped", "parent"
            if set(latest) == set(child.parents):
                return "queued", None
        return None, None

    @invariant()
    def one_child_run_per_decided_tick(self) -> None:
        if not self.children:
            return
        rows = self.run(self.pool.fetch(
            "SELECT job_id, scheduled_for, attempt, state, skip_reason, trigger FROM runs WHERE job_id = ANY($1)",
            [c.id for c in self.children],
        ))  # fmt: skip
        runs: dict[tuple[int, datetime], list[asyncpg.Record]] = defaultdict(list)
        for row in rows:  # type: ignore[attr-defined]
            runs[(row["job_id"], row["scheduled_for"])].append(row)
        for child in self.children:
            for n in range(TICKS):
                key = (child.id, tick(n))
                state, reason = self._decision(key)
                found = runs.get(key, [])
                if state is None:
                    assert found == [], (key, found, self.model[key])
                    continue
                assert len(found) == 1, (key, found, self.model[key])
                (run,) = found
                assert (run["state"], run["attempt"], run["trigger"]) == (state, 1, "chain"), (run, self.model[key])
                if reason is not None and state == "skipped":
                    assert run["skip_reason"].startswith(reason), (run, self.model[key])
        retried = self.run(self.pool.fetchval(  # an arrival is a final end: no later attempt of its tick
            "SELECT count(*) FROM chain_joins j, unnest(j.runs) AS a(run_id) JOIN runs r ON r.id = a.run_id"
            " WHERE j.child_id = ANY($1) AND EXISTS (SELECT 1 FROM runs l WHERE l.job_id = r.job_id"
            " AND l.scheduled_for = r.scheduled_for AND l.attempt > r.attempt)", [c.id for c in self.children],
        ))  # fmt: skip
        assert retried == 0
        edge_runs = self.run(self.pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", self.edge_child))
        assert edge_runs == self.fired_edge


SETTINGS = hypothesis_settings(
    max_examples=15,
    stateful_step_count=12,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.timeout(240)
def test_joins_state_machine(database_url: str) -> None:
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(connect(database_url, min_size=2, max_size=4))
    JoinMachine.world = World(loop, pool)
    try:
        run_state_machine_as_test(JoinMachine, settings=SETTINGS)
    finally:
        JoinMachine.world = None
        loop.run_until_complete(pool.close())
        loop.close()
