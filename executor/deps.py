"""What the executor's steps work with, wired once: each step's I/O is a cronos store,
lock or stream method, reached through a `Batcher` so that per-token code stays a
straight line and still costs one round trip per batch (see `executor.batcher`).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

from cronos import lifecycle, presence, tasks
from cronos.aio import Foreground
from cronos.clock import DbClock
from cronos.errors import BackendUnavailable
from cronos.keys import Keys
from cronos.locks import TickLocks
from cronos.store.runs import Claim, ClaimedRun, ClaimRequest, Outcome, Refused, RunStore
from cronos.stream import EntryRef, RunStream
from executor.batcher import Batcher
from executor.gate import Gate
from executor.health import BackendHealth
from executor.kinds import Env
from executor.routing import Routing
from executor.tally import Tally
from executor.tracing import Tracer
from executor.usage_metrics import JobUsage

log = logging.getLogger("cronos.executor")

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
    reserve_ahead: bool = False  # runs reserved when their token arrives ahead of due (CRONOS_RESERVE_AHEAD)
    cancel_grace_s: float = 10.0  # a cancelled run's work is cancelled this long after it is told to stop
    tracer: Tracer | None = None  # runs' spans (executor.tracing); None: traces are off
    gate: Gate[ClaimRequest, Claim] = field(init=False)  # steps 2-3 at the due instant, with an execution slot
    locks: Batcher[str, bool] = field(init=False)  # step 1
    reserves: Batcher[ClaimRequest, ClaimedRun | None] = field(init=False)  # step 2 ahead of the due instant
    claims: Batcher[ClaimRequest, Claim] = field(init=False)  # steps 2-3, behind the gate
    starting: Batcher[ClaimRequest, Claim] = field(init=False)  # reserved runs at their instant, behind the gate
    finishes: Batcher[Outcome, bool] = field(init=False)  # step 5
    settles: Batcher[Settle, None] = field(init=False)  # step 6
    in_flight: dict[int, InFlight] = field(default_factory=dict)  # run id -> its execution (step 4)
    tally: Tally = field(init=False)  # runs started here (its share: a metric and its presence)
    usage: JobUsage = field(init=False)  # what runs used, per job (bounded histograms)
    given_back: int = 0  # runs reserved here that could not start at their instant (tests read it)
    # While claims go out, finishes wait (a quarter second at most at a time): the runs waiting to
    # start come before recording the ones that ended (their statements would share PostgreSQL).
    claiming: Foreground = field(default_factory=Foreground)

    def __post_init__(self, concurrency: int) -> None:
        # A tick lock is taken up to the push lead before the run is claimed: its ttl covers both.
        lock_ttl_ms = self.lead_ms + int(self.lease_s * 1000)
        self.claims = Batcher("claims", self._claim, max_size=CLAIM_BATCH, foreground=self.claiming)
        self.starting = Batcher("starting", self._start_reserved, max_size=CLAIM_BATCH)
        self.gate = Gate(self.claims, concurrency, self.clock.time, route=self._reserved)
        self.locks = Batcher("locks", functools.partial(self.tick_locks.acquire, ttl_ms=lock_ttl_ms))
        self.reserves = Batcher("reserves", self._reserve, max_size=CLAIM_BATCH, foreground=self.claiming)
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
        return [self.locks, self.reserves, self.claims, self.starting, self.finishes, self.settles]  # type: ignore[list-item]

    async def _reserve(self, requests: list[ClaimRequest]) -> list[ClaimedRun | None]:
        ids, ticks_ms = [r.run_id for r in requests], [r.scheduled_for_ms for r in requests]
        return await self.store.reserve(ids, self.node_id, self.lease_s, ticks_ms)

    async def _claim(self, requests: list[ClaimRequest]) -> list[Claim]:
        ids, ticks_ms = [r.run_id for r in requests], [r.scheduled_for_ms for r in requests]
        claims = await self.store.claim(ids, self.node_id, self.lease_s, ticks_ms)
        self.tally.count(claims)
        return claims

    def _reserved(self, request: ClaimRequest) -> Batcher[ClaimRequest, Claim] | None:
        return self.starting if request.reserved is not None else None

    async def _start_reserved(self, requests: list[ClaimRequest]) -> list[Claim]:
        """At the due instant, the runs reserved here start (Event.STARTED: one statement that
        reads nothing of their jobs) while lifecycle.startable says so. One that cannot start is
        given back; it, and one the API took back meanwhile (edited, paused, cancelled, deleted),
        is then claimed as any queued run (with its job as it is now), or found ended. A backend
        failure reaches every token of the batch: each goes through again once PostgreSQL answers
        (its reservation given back first)."""
        now = self.clock.time()
        startable: list[ClaimedRun] = []
        late: list[ClaimRequest] = []
        for request in requests:
            run = request.reserved
            assert run is not None and run.lease_until is not None  # routed here by _reserved
            expires_s = None if run.expires_at is None else run.expires_at.timestamp()  # as stamped
            if lifecycle.startable(now, run.lease_until.timestamp(), expires_s):
                startable.append(run)
            else:
                late.append(request)
        started = {}
        if startable:
            ticks = [r.scheduled_for for r in startable]
            started = await self.store.start([r.id for r in startable], self.node_id, ticks)
        claims: dict[int, Claim] = {}
        for run in startable:
            if run.id in started:
                run.started_at, run.lease_until = started[run.id], None
                claims[run.id] = run
        self.tally.count(list(claims.values()))  # the runs started here now (the ones claimed again count in _claim)
        again = [r._replace(reserved=None) for r in requests if r.run_id not in claims]
        try:
            if late:
                self.given_back += len(late)
                await self.store.unreserve([r.run_id for r in late], self.node_id)
            if again:
                claims.update(zip([r.run_id for r in again], await self._claim(again), strict=True))
        except BackendUnavailable as exc:  # the started ones run; the others' tokens are settled
            # (one given back or taken back is pushed again by the watchdog, one still reserved released)
            self.health.report(exc)
            log.warning("reserved runs not started: %s", exc, extra={"event": "run.start_failed", "count": len(again)})
        return [claims.get(r.run_id, Refused.NOT_QUEUED) for r in requests]

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
