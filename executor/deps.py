"""What the executor's steps work with, wired once: each step's I/O is a cronos store,
lock or stream method, reached through a `Batcher` so that per-token code stays a
straight line and still costs one round trip per batch (see `executor.batcher`).
"""

from __future__ import annotations

import functools
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

from cronos import presence, tasks
from cronos.aio import Foreground
from cronos.clock import DbClock
from cronos.keys import Keys
from cronos.locks import TickLocks
from cronos.store.runs import Claim, ClaimRequest, Outcome, RunStore
from cronos.stream import EntryRef, RunStream
from executor.batcher import Batcher
from executor.gate import Gate
from executor.health import BackendHealth
from executor.kinds import Env
from executor.routing import Routing
from executor.tally import Tally
from executor.tracing import Tracer
from executor.usage_metrics import JobUsage

if TYPE_CHECKING:
    from executor.running import InFlight

# Runs claimed a statement at a time: a second's thousand ticks go in two statements back to back,
# and the first half's tasks start while PostgreSQL claims the rest (in one statement, none
# started before the thousandth row was claimed and its answer decoded). Smaller batches cost
# more statements for no gain: at 1,000 every-second jobs, p99 at the task 200-234 ms at 125 a
# statement, 191-199 ms at 250, 168-201 ms at 500, and CPU a run 0.72 / 0.65 / 0.59 ms (one
# sitting, two runs each).
CLAIM_BATCH = 500


@dataclass(frozen=True, slots=True)
class Settle:
    """Step 6 for one token: release its lock (if taken), then acknowledge its entry
    (None: leave it pending, for a token this executor gives back unclaimed)."""

    lock_key: str | None
    entry: EntryRef | None


@dataclass(eq=False, kw_only=True)
class Deps:
    """What the executor opened (given), and the gate and batchers derived from it (here, once)."""

    node_id: str
    keys: Keys
    lease_s: float
    lead_ms: int  # how far ahead of its due time a tick lock is taken (its ttl covers it)
    env: Env
    store: RunStore
    stream: RunStream
    tick_locks: TickLocks
    health: BackendHealth
    clock: DbClock  # PostgreSQL's: tokens are held and claimed by it
    redis: Any  # the Redis client (routing reads the other executors' presence)
    concurrency: InitVar[int]  # execution slots: the gate's
    routing: Routing = field(init=False)  # tokens this node cannot run (presence.can_run)
    capability: presence.Capability = field(init=False)  # what this node can run
    cancel_grace_s: float = 10.0  # a cancelled run's work is cancelled this long after it is told to stop
    tracer: Tracer | None = None  # runs' spans (executor.tracing); None: traces are off
    gate: Gate[ClaimRequest, Claim] = field(init=False)  # steps 2-3 at the due instant, with an execution slot
    locks: Batcher[str, bool] = field(init=False)  # step 1
    claims: Batcher[ClaimRequest, Claim] = field(init=False)  # steps 2-3, behind the gate
    finishes: Batcher[Outcome, bool] = field(init=False)  # step 5
    settles: Batcher[Settle, None] = field(init=False)  # step 6
    in_flight: dict[int, InFlight] = field(default_factory=dict)  # run id -> its execution (step 4)
    tally: Tally = field(init=False)  # runs started here (its share: a metric and its presence)
    usage: JobUsage = field(init=False)  # what runs used, per job (bounded histograms)
    # While claims go out, finishes wait (a quarter second at most at a time): the runs waiting to
    # start come before recording the ones that ended (their statements would share PostgreSQL).
    claiming: Foreground = field(default_factory=Foreground)

    def __post_init__(self, concurrency: int) -> None:
        # A tick lock is taken up to the push lead before the run is claimed: its ttl covers both.
        lock_ttl_ms = self.lead_ms + int(self.lease_s * 1000)
        self.claims = Batcher("claims", self._claim, max_size=CLAIM_BATCH, foreground=self.claiming)
        self.gate = Gate(self.claims, concurrency, self.clock.time)
        self.locks = Batcher("locks", functools.partial(self.tick_locks.acquire, ttl_ms=lock_ttl_ms))
        self.finishes = Batcher("finishes", self._finish)
        self.settles = Batcher("settles", self._settle)
        self.tally = Tally(self.node_id)
        self.usage = JobUsage(self.env.settings.job_metrics_max, self.env.settings.job_metrics_jobs)
        self.routing = Routing(self.redis, self.keys, self.stream, self.node_id, fresh_s=self.lease_s / 3)
        # What this node can run (its presence announces the same): the live registry, so a task
        # registered after the start counts.
        self.capability = presence.Capability(self.stream.queues, tasks.names(), self.env.settings.allow_shell)

    @property
    def batchers(self) -> list[Batcher[object, object]]:
        return [self.locks, self.claims, self.finishes, self.settles]  # type: ignore[list-item]

    async def _claim(self, requests: list[ClaimRequest]) -> list[Claim]:
        ids, ticks_ms = [r.run_id for r in requests], [r.scheduled_for_ms for r in requests]
        claims = await self.store.claim(ids, self.node_id, self.lease_s, ticks_ms)
        self.tally.count(claims)
        return claims

    async def _finish(self, outcomes: list[Outcome]) -> list[bool]:
        await self.claiming.idle()
        written = (await self.store.finish(outcomes)).written
        return [o.run_id in written for o in outcomes]

    async def _settle(self, items: list[Settle]) -> list[None]:
        lock_keys = [i.lock_key for i in items if i.lock_key is not None]
        entries = [i.entry for i in items if i.entry is not None]
        await self.stream.settle(entries, self.tick_locks, lock_keys)
        return [None] * len(items)


wire = Deps  # executor.service wires its Deps by this name, from keyword arguments
