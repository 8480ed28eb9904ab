"""What happens to one run token, step by step (DESIGN.md "Execution", steps 1-6).

`process` reads as the design: lock, claim (with the concurrency policy), run under the
timeout while the heartbeat keeps the lease, record, release, acknowledge. Each step is
one helper calling the cronos lock, store or stream method wired in `executor.deps`,
batched across tokens.

A token pushed ahead of its due time (the leader's push lead) is locked at once and its run
reserved (cronos.lifecycle Event.RESERVED: claimed ahead, for the runs `claims_at_once` claims),
then held at the gate until the due instant, when a reserved run starts without a round trip
(its start recorded after it, `executor.starts`, or with its finish) and every other token due
then goes to the claims batcher at once (statements of `CLAIM_BATCH` runs, back to back): a
burst starts together, never early.
An execution slot is taken at the gate only then, and given back as soon as the work ends
(recording and acknowledging happen outside it), so held tokens never keep due runs from
starting.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from cronos import delays, metrics, presence
from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable
from cronos.logs import bind
from cronos.messages import RunToken
from cronos.store.runs import SKIP_REASONS, Claim, ClaimedRun, ClaimRequest, Outcome, Refused
from cronos.stream import Delivery, EntryRef
from executor.deps import Deps, Settle
from executor.gate import Withdrawn
from executor.running import InFlight, run_under_timeout

log = logging.getLogger("cronos.executor")

# A token read this long past its run's grace is past it by PostgreSQL's clock too.
PAST_GRACE_MARGIN_MS = 1000


class TokenOutcome(StrEnum):
    """How one token ended on this executor, besides a claim's refusal (cronos.lifecycle.Refused:
    skipped, waiting, not_queued, ..., passed on as the claim answered)."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"  # someone cancelled it while it ran (executor.cancels)
    LOCK_DENIED = "lock_denied"  # another executor holds this tick
    LOST = "lost"  # the run was taken away while it ran: nothing reported
    GIVEN_BACK = "given_back"  # drained before its due time: left pending, unclaimed
    DEFERRED = "deferred"  # a backend failed and the executor stopped before it answered: left pending
    MALFORMED = "malformed"  # undecodable entry: acknowledged and dropped
    HANDED_OVER = "handed_over"  # not runnable here (its action, shell): given back to the queue's other executors
    UNSERVED = "unserved"  # no live executor of its queue can run it: acknowledged, the run left queued
    PAST_GRACE = "past_grace"  # read past its run's misfire grace: acknowledged unclaimed (the reaper expires the run)
    ERROR = "error"  # a bug: logged, left pending


Ended = TokenOutcome | Refused  # how a token ended here: a claim's refusal as the claim answered


async def process(delivery: Delivery, deps: Deps) -> Ended:
    """Take one token through steps 1-6."""
    token = delivery.token
    if token is None:  # undecodable entry: nothing to run, do not let it block the group
        await settle(deps, None, delivery.ref)
        return TokenOutcome.MALFORMED
    with bind(
        job_id=token.job_id,
        run_id=token.run_id,
        attempt=token.attempt,
        epoch=token.epoch,
        scheduled_for=_iso(token.scheduled_for_ms),
    ):
        retried = False
        while True:
            try:
                return await _process(token, delivery.ref, deps, retried=retried)
            except BackendUnavailable as exc:
                # Failed before the claim (lock or claim: the steps after it keep their own
                # retries). The token stays pending and in hand, and goes through again as soon as
                # the backend answers: a blip costs the blip, not an XAUTOCLAIM idle time.
                deps.health.report(exc)
                log.warning("token deferred until %s answers: %s", exc.backend, exc, extra={"event": "token.deferred"})
                if not await deps.health.wait_up(exc.backend):
                    return TokenOutcome.DEFERRED  # the executor is stopping: left pending
                log.info("token retried", extra={"event": "token.retried"})
                retried = True


async def _process(token: RunToken, entry: EntryRef, deps: Deps, *, retried: bool = False) -> Ended:
    if past_grace(token, deps.clock.time()):
        # Its run can only end skipped "expired" now, which the leader's reaper does a page at a
        # time: no lock and no claim spent on it. Under an overload whose backlog outgrew the
        # grace, each expired token cost a lock and two claim statements, and the executors did
        # nothing else (0 runs/s, every run expiring).
        await settle(deps, None, entry)
        metrics.TOKENS_PAST_GRACE.inc()
        log.debug("token read past its run's grace", extra={"event": "token.past_grace"})
        return TokenOutcome.PAST_GRACE
    # Step 0: one it can run, and a per-host run only on its host (cronos.every_host).
    if not presence.can_run(deps.capability, entry[0], token.action, token.shell) or token.host not in (
        None,
        deps.node_id,
    ):
        if await deps.routing.decline(token, entry):
            return TokenOutcome.HANDED_OVER
        await settle(deps, None, entry)
        return TokenOutcome.UNSERVED
    lock_key = deps.keys.tick_lock(token.job_id, token.scheduled_for_ms, token.attempt, token.host)
    if retried and deps.reserve_ahead and token.due_ms is not None:
        # A reservation whose answer a blip lost may have committed: given back (if it did), the
        # run is claimed or reserved again below instead of being found reserved and dropped.
        await give_back(deps, token.run_id)
    due_ms = _due_ms(token, deps.clock.time())
    reserved: ClaimedRun | None = None
    try:
        # Pushed ahead of its due time: locked no earlier than the lock's ttl covers (the lead).
        await deps.gate.until(None if due_ms is None else due_ms - deps.lead_ms)
        if not await take_tick_lock(deps, lock_key):  # step 1
            await settle(deps, None, entry)
            return TokenOutcome.LOCK_DENIED
        if due_ms is not None and deps.reserve_ahead:  # ahead of its instant: reserved now, started then
            reserved = await deps.reserves.submit(ClaimRequest(token.run_id, token.scheduled_for_ms))
        claim = await claim_run(deps, token, due_ms, reserved)  # steps 2 and 3, holding a slot once it answers
    except Withdrawn:
        # The drain deadline came first: given back unclaimed, its entry left pending.
        if reserved is not None:
            await give_back(deps, reserved.id)
        await settle(deps, lock_key, None)  # compare-and-delete: only if the lock is ours
        log.info("token given back unclaimed", extra={"event": "token.given_back"})
        return TokenOutcome.GIVEN_BACK
    except BackendUnavailable as exc:  # before a reservation, or from a claim (a reserved run's start asks nothing)
        if exc.backend == "postgresql":
            # This node cannot claim now: give the tick lock back, so the token pushed again (the
            # watchdog) runs on an executor that reaches PostgreSQL instead of being denied.
            await settle(deps, lock_key, None)
        raise
    if isinstance(claim, Refused):  # a waiting run holds no token, lock or slot: its wake pushes a new token
        deps.gate.leave()
        await settle(deps, lock_key, entry)
        return claim
    flight = deps.in_flight[claim.id] = InFlight(claim, lock_key, entry)
    span = None  # the run's span while traces are on (docs/tracing.md)
    ended = TokenOutcome.ERROR
    try:
        try:
            if deps.tracer is not None:
                span = deps.tracer.begin(token, entry[1], claim)
            outcome = await run_under_timeout(flight, deps.env, deps.node_id)  # step 4
        finally:
            deps.gate.leave()  # the slot is the work's only: recording happens outside it
        ended = await record(deps, flight, outcome)  # step 5
    finally:
        deps.in_flight.pop(claim.id, None)
        if span is not None:  # sent once the outcome is written: a run lost to another node sends none
            span.end(outcome if ended not in (TokenOutcome.LOST, TokenOutcome.ERROR) else None)
    await settle(deps, lock_key, entry)  # step 6
    return ended


def past_grace(token: RunToken, now: float) -> bool:
    """Read past its run's stamped expiry (`now`: PostgreSQL's clock, unix time; lifecycle.expired),
    with a margin for the error of this node's estimate of that clock. A token without it (from an
    older leader) is claimed: the claim judges the run by its stamped expiry."""
    # lifecycle.expired (now >= expires), in the token's ms: no datetime made per token
    return token.expires_ms is not None and now * 1000 >= token.expires_ms + PAST_GRACE_MARGIN_MS


def _due_ms(token: RunToken, now: float) -> int | None:
    """When the token may be claimed, by PostgreSQL's clock (`now`, unix time): the ms after its
    due time (due_ms is the floor of a due time that may have a fraction of a ms), never before
    its tick."""
    if token.due_ms is None:
        return None  # from a leader that pushes when due
    due_ms = max(token.due_ms, token.scheduled_for_ms) + 1
    return due_ms if now * 1000 < due_ms else None


async def take_tick_lock(deps: Deps, lock_key: str) -> bool:
    """Step 1: `SET lock NX PX`; denied means another executor has this tick."""
    granted = await deps.locks.submit(lock_key)
    _child(metrics.LOCK_ACQUISITIONS, lock="tick", result="granted" if granted else "denied").inc()
    if not granted:
        log.info("tick lock held by another executor", extra={"event": "token.lock_denied"})
    return granted


async def claim_run(deps: Deps, token: RunToken, due_ms: int | None, reserved: ClaimedRun | None = None) -> Claim:
    """Steps 2-3: at the due instant, with an execution slot, the run reserved ahead starts, or
    the conditional claim (batched with every token due then); the job's concurrency policy
    decides overlaps (cronos.lifecycle)."""
    request = ClaimRequest(token.run_id, token.scheduled_for_ms, reserved)
    claim = await deps.gate.claim(request, due_ms)
    if isinstance(claim, Refused) and (reason := SKIP_REASONS.get(claim)) is not None:
        _child(metrics.RUNS_SKIPPED, reason=reason).inc()
        log.info("tick skipped: %s", reason, extra={"event": "run.skipped"})
    elif claim is Refused.WAIT:
        log.info("run waits for its job's running run", extra={"event": "run.waiting"})
    elif claim is Refused.WAIT_GROUP:
        log.info("run waits for a slot of its concurrency group", extra={"event": "run.waiting_group"})
    elif claim is Refused.NOT_QUEUED:
        log.debug("run not queued any more", extra={"event": "token.not_queued"})
    return claim


async def give_back(deps: Deps, run_id: int) -> None:
    """A run reserved here that will not start here: queued again (Event.UNRESERVED), for any
    executor to claim (nothing when it is not reserved here); if PostgreSQL does not answer, its
    lease runs out and the reaper ends it."""
    try:
        await deps.store.unreserve([run_id], deps.node_id)
    except BackendUnavailable as exc:
        deps.health.report(exc)
        log.warning("reserved run not given back: %s", exc, extra={"event": "run.unreserve_failed"})


async def record(deps: Deps, flight: InFlight, outcome: Outcome | None) -> TokenOutcome:
    """Step 5: write the outcome while still owning the run; kept and retried while PostgreSQL is away."""
    run = flight.run
    if outcome is None:
        log.warning("run taken over by another node: reporting nothing", extra={"event": "run.lost"})
        return TokenOutcome.LOST
    backoff: Backoff | None = None  # made on the first failure: a Backoff seeds an RNG
    while True:
        try:
            # Once submitted, the write goes out with its batch even if this task is cancelled.
            written = await deps.finishes.submit(outcome)
            break
        except BackendUnavailable as exc:
            deps.health.report(exc)
            log.warning("result not written yet, will retry: %s", exc, extra={"event": "run.record_deferred"})
            backoff = backoff or Backoff(base_s=0.1, cap_s=5.0)
            await asyncio.sleep(backoff.next_delay())
    if not written:
        log.warning("run taken over before its result was written: reporting nothing", extra={"event": "run.lost"})
        return TokenOutcome.LOST
    _child(metrics.RUNS, state=outcome.state, kind=run.kind).inc()
    metrics.RUN_DURATION.observe((outcome.duration_ms or 0) / 1000, run.kind)
    if outcome.usage is not None:
        deps.usage.observe(run.name, outcome.usage)
    fields: dict[str, object] = {
        "kind": run.kind,
        "duration_ms": round(outcome.duration_ms or 0, 2),
        "start_delay_s": round(delays.start_delay_s(run.scheduled_for, run.started_at) or 0.0, 4),
        "waited_s": round(delays.waited_s(run.due_at, run.started_at) or 0.0, 4),
    }
    if outcome.state == "completed":
        log.info("run completed", extra={"event": "run.completed", **fields})
        return TokenOutcome.COMPLETED
    if outcome.state == "cancelled":
        log.info("run %s", outcome.error, extra={"event": "run.cancelled", **fields})
        return TokenOutcome.CANCELLED
    fields.update(error=outcome.error, retry_in_s=outcome.retry_delay_s)
    log.warning("run failed: %s", outcome.error, extra={"event": "run.failed", **fields})
    return TokenOutcome.FAILED


async def settle(deps: Deps, lock_key: str | None, entry: EntryRef | None) -> None:
    """Step 6: release the tick lock (compare-and-delete), then XACK. Retried a little; the
    lock expires on its own and an unacknowledged entry is reclaimed and found finished."""
    backoff: Backoff | None = None
    for attempt in range(5):
        try:
            await deps.settles.submit(Settle(lock_key, entry))
            return
        except BackendUnavailable as exc:
            if attempt == 4:
                deps.health.report(exc)
                log.warning("could not release/acknowledge: %s", exc, extra={"event": "token.settle_failed"})
                return
            backoff = backoff or Backoff(base_s=0.05, cap_s=1.0)
            await asyncio.sleep(backoff.next_delay())


def _child(metric: Any, **labels: str) -> Any:
    """The labelled child of a metric, looked up once (labels() costs more than inc()); keyed by
    the labels as given, unsorted: a call site passes them in one order."""
    key = (metric, *labels.items())
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(**labels)
    return child


_children: dict[tuple[Any, ...], Any] = {}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()
