"""Runs on every host as a state machine against PostgreSQL: executors join and leave, leaders are
elected (the older ones deposed), and ticks of a per-host job are written — again and again, by the
current leader or a deposed one, with the cursor put back as after a failover — each with the hosts
cronos.every_host chooses from the fleet of that moment (dispatcher.host_fanout.plan_hosts, then
Ledger.write_ticks) — and hosts' runs fail, claimed and finished through the real store, each
retried while the job has retries left. After every step: at most one run per (tick, attempt, host)
and one row of the tick's own (G1 per host); each tick's first runs are the hosts live when it was
first written, never changed by a later write; each host's retries are on that host, one per
failure with a retry left; a tick no executor could take is recorded skipped "no_host"; a deposed
leader writes nothing (G5)."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import asyncpg
import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from cronos import presence
from cronos.errors import NotLeader
from cronos.every_host import SKIP_NO_HOST, SKIP_PER_HOST, Host, HostSpec
from cronos.lifecycle import expiry, retry_delay_s
from cronos.store.claims import ClaimedRun
from cronos.store.db import connect
from cronos.store.epoch import EpochStore
from cronos.store.ledger import Ledger
from cronos.store.runs import Outcome, RunStore
from dispatcher.host_fanout import plan_hosts
from dispatcher.planner import TickBatch

T0 = datetime(2030, 6, 1, tzinfo=UTC)
NODES = ("a", "b", "c", "d")
TICKS = 6
RETRIES = 2
_names = itertools.count()


class PerHostMachine(RuleBasedStateMachine):
    world: ClassVar[tuple[asyncio.AbstractEventLoop, asyncpg.Pool] | None] = None

    def __init__(self) -> None:
        super().__init__()
        assert self.world is not None, "run by test_per_host_state_machine"
        self.loop, self.pool = self.world
        self.ledger, self.epochs = Ledger(self.pool), EpochStore(self.pool)
        self.fleet: set[str] = set()
        self.written: dict[int, list[str]] = {}  # tick index -> its hosts, as first written
        self.epoch = 0
        self.deposed: list[int] = []
        self.job = 0
        self.spec = HostSpec()
        self.failed: Counter[tuple[int, str]] = Counter()  # (tick index, host) -> its runs that failed

    def run(self, aw: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(aw)

    @initialize(count=st.none() | st.integers(1, 3))
    def start(self, count: int | None) -> None:
        self.spec = HostSpec(count=count)
        self.job = self.run(
            self.pool.fetchval(
                "INSERT INTO jobs (name, cron_expression, status, concurrency_policy, hosts, last_scheduled_for,"
                " max_retries, retry_backoff_s) VALUES ($1, '* * * * *', 'active', 'allow', '{}'::jsonb, $2, $3, 0)"
                " RETURNING id",
                f"per-host-{next(_names)}",
                T0 - timedelta(minutes=1),
                RETRIES,
            )
        )
        self.elect()

    @rule()
    def elect(self) -> None:
        if self.epoch:
            self.deposed.append(self.epoch)
        self.epoch = self.run(self.epochs.take(f"leader-{next(_names)}")).epoch

    @rule(node=st.sampled_from(NODES))
    def join(self, node: str) -> None:
        self.fleet.add(node)

    @rule(node=st.sampled_from(NODES))
    def leave(self, node: str) -> None:
        self.fleet.discard(node)

    @rule(index=st.integers(0, TICKS - 1), stale=st.booleans(), back=st.booleans())
    def write(self, index: int, stale: bool, back: bool) -> None:
        if back:  # a failover's leader writes again from an older cursor
            self.run(
                self.pool.execute(
                    "UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", self.job, T0 - timedelta(minutes=1)
                )
            )
        tick = T0 + timedelta(minutes=index)
        batch = TickBatch(job_ids=[self.job], scheduled_for=[tick], due_at=[tick], skip_reason=[SKIP_PER_HOST])
        batch.revision.append(1)
        batch.per_host[self.job] = self.spec
        hosts = [Host(n, presence.Capability(("default",), None, None)) for n in sorted(self.fleet)]
        fan_out = plan_hosts(batch, hosts)
        epoch = self.deposed[-1] if stale and self.deposed else self.epoch
        write = self.ledger.write_ticks(
            epoch,
            batch.job_ids,
            batch.scheduled_for,
            batch.due_at,
            batch.skip_reason,
            batch.revision,
            expires_at=[expiry(tick, 60)],
            fan_out=fan_out,
        )
        if epoch != self.epoch:
            with pytest.raises(NotLeader):
                self.run(write)
            return
        self.run(write)
        cursor = self.run(self.pool.fetchval("SELECT last_scheduled_for FROM jobs WHERE id = $1", self.job))
        if index not in self.written and cursor == tick:  # written now (a tick before the cursor is not)
            self.written[index] = fan_out.get(self.job, [])

    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        """One of the hosts' queued runs is claimed on its host and fails."""
        queued = self.run(
            self.pool.fetch(
                "SELECT id, scheduled_for, host FROM runs WHERE job_id = $1 AND host <> '' AND state = 'queued'"
                " ORDER BY id",
                self.job,
            )
        )
        if not queued:
            return
        row = data.draw(st.sampled_from(queued))
        node, index = row["host"], int((row["scheduled_for"] - T0) / timedelta(minutes=1))
        store = RunStore(self.pool)
        (claimed,) = self.run(store.claim([row["id"]], node, 30.0))
        assert isinstance(claimed, ClaimedRun), claimed  # `allow`: a host's run never waits for another's
        delay = retry_delay_s(claimed.attempt, claimed.max_retries, claimed.retry_backoff_s)
        failed = Outcome(run_id=row["id"], node_id=node, state="failed", error="x", retry_delay_s=delay)
        self.run(store.finish([failed]))
        self.failed[(index, node)] += 1

    @invariant()
    def one_run_per_tick_and_host_each_as_first_written(self) -> None:
        if not self.job:
            return
        rows = self.run(
            self.pool.fetch(
                "SELECT scheduled_for, attempt, nullif(host, '') AS host, state, skip_reason FROM runs"
                " WHERE job_id = $1",
                self.job,
            )
        )
        per = Counter((r["scheduled_for"], r["attempt"], r["host"]) for r in rows)
        assert max(per.values(), default=1) == 1, per  # G1 per host, and one row of the tick's own
        for index in range(TICKS):
            tick = T0 + timedelta(minutes=index)
            mine = [r for r in rows if r["scheduled_for"] == tick]
            if index not in self.written:
                assert mine == [], (index, mine)
                continue
            hosts = self.written[index]
            own = [(r["state"], r["skip_reason"]) for r in mine if r["host"] is None]
            assert own == [("skipped", SKIP_PER_HOST if hosts else SKIP_NO_HOST)], (index, own)
            assert sorted(r["host"] for r in mine if r["host"] is not None and r["attempt"] == 1) == hosts
            for host in hosts:  # its retries on its own host: one per failure with a retry left
                attempts = sorted(r["attempt"] for r in mine if r["host"] == host)
                failed = self.failed[(index, host)]
                assert attempts == list(range(1, 2 + min(failed, RETRIES))), (index, host, attempts, failed)
                states = [r["state"] for r in sorted(mine, key=lambda r: r["attempt"]) if r["host"] == host]
                assert states == ["failed"] * failed + ["queued"] * (len(states) - failed), (index, host, states)
            assert not any(r["host"] not in hosts for r in mine if r["host"] is not None)
            if self.spec.count is not None:
                assert len(hosts) <= self.spec.count


SETTINGS = hypothesis_settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.timeout(180)
def test_per_host_state_machine(database_url: str) -> None:
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(connect(database_url, min_size=1, max_size=2))
    PerHostMachine.world = (loop, pool)
    try:
        run_state_machine_as_test(PerHostMachine, settings=SETTINGS)
    finally:
        PerHostMachine.world = None
        loop.run_until_complete(pool.close())
        loop.close()
