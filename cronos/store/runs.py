"""The executor's side of the runs ledger: claim, heartbeat, finish, and the leader's reaper.

Every write is conditional (on `state`, on the owning node, on the leader's epoch) so
that a repeated token, a paused executor or a deposed leader changes nothing. Batches go
to PostgreSQL as one statement each: the claim and the finish of N runs cost one round
trip, and `round_trips` counts them for the benchmark.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, NamedTuple

import asyncpg
import msgspec

from cronos import lifecycle, metrics
from cronos.clock import DbClock
from cronos.errors import Contention
from cronos.models import (
    FAIL_EXECUTOR_LOST,
    FAIL_REPLACED,
    SKIP_BUFFER_FULL,
    SKIP_EXPIRED,
    SKIP_OVERLAP,
    ConcurrencyPolicy,
    JobKind,
)
from cronos.store import queries as q
from cronos.store.db import ping, retry_contention, sync_clock, to_struct, translate_errors
from cronos.store.epoch import fenced

log = logging.getLogger("cronos.store.runs")


class ClaimedRun(msgspec.Struct, kw_only=True):
    """A run this node now owns, with what the executor needs of its job."""

    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    trigger: str
    epoch: int | None
    started_at: datetime
    exclusive: bool
    name: str
    kind: JobKind
    payload: dict[str, Any]
    timeout_s: float
    max_retries: int
    retry_backoff_s: float
    concurrency_policy: ConcurrencyPolicy
    webhook_secret: str  # signs http runs' requests (Standard Webhooks)


class ClaimRequest(NamedTuple):
    """A run to claim, its tick (a token's scheduled_for_ms: the claim reads only that day's
    partition); `waiting`: it was answered Refused.WAIT before and asks again."""

    run_id: int
    scheduled_for_ms: int
    waiting: bool = False


class Refused(StrEnum):
    """Why a run was not claimed: expected outcomes, answered as values."""

    NOT_QUEUED = "not_queued"  # already claimed, finished or gone (a repeated token)
    OVERLAP = "skipped"  # ended `skipped` SKIP_OVERLAP: the job's previous run is still running
    BUFFER_FULL = "buffer_full"  # ended `skipped` SKIP_BUFFER_FULL (buffer_one: another run waits)
    WAIT = "wait"  # still queued: its predecessor is running and the policy lets it wait (claim again)


Claim = ClaimedRun | Refused
# The skip reason a run refused by its job's concurrency policy is recorded with.
SKIP_REASONS: dict[Refused, str] = {Refused.OVERLAP: SKIP_OVERLAP, Refused.BUFFER_FULL: SKIP_BUFFER_FULL}


class Outcome(msgspec.Struct, kw_only=True):
    """The end of one run, written only while `node_id` still owns it."""

    run_id: int
    node_id: str
    state: Literal["completed", "failed"]
    error: str | None = None
    traceback: str | None = None
    result: str | None = None
    duration_ms: float | None = None  # None: computed from started_at
    retry_delay_s: float | None = None  # None: no retry
    scheduled_for: datetime | None = None  # the run's tick, when known: the write looks in its day only


class FinishResult(msgspec.Struct, kw_only=True):
    written: set[int]  # run ids whose outcome was recorded (the others were not ours any more)
    retried: int
    chained: int = 0  # runs queued for child jobs (chains) by the completed ones


class ReapResult(msgspec.Struct, kw_only=True):
    lost: int = 0  # running runs whose lease expired, now failed "executor lost"
    expired: int = 0  # queued runs past their misfire grace, now skipped "expired"
    retried: int = 0  # retries queued for the lost ones


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Window = tuple[datetime | None, datetime | None]


def window(ticks: Sequence[datetime | None], resolution: timedelta = timedelta(microseconds=1)) -> Window:
    """[lo, hi) holding every tick (each known to `resolution`), so a statement on these runs
    looks only in the partitions of their days; (None, None), every partition, when one is unknown."""
    if not ticks or any(t is None for t in ticks):
        return None, None
    known = [t for t in ticks if t is not None]
    return min(known), max(known) + resolution


def window_ms(ticks_ms: Sequence[int] | None) -> Window:
    """`window` of ticks known to the millisecond (a token's scheduled_for_ms, the floor of its tick)."""
    if not ticks_ms:
        return None, None
    return window([_EPOCH + timedelta(milliseconds=ms) for ms in ticks_ms], timedelta(milliseconds=1))


class RunStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.round_trips = 0  # statements sent, for the benchmark's "round trips per run"

    async def claim(
        self,
        run_ids: Sequence[int],
        node_id: str,
        lease_s: float,
        ticks_ms: Sequence[int] | None = None,
        *,
        waiting: Collection[int] = (),
    ) -> list[Claim]:
        """Claim queued runs for `node_id`, applying each job's concurrency policy: one answer
        per id, in order (an id repeated in the batch gets the run once). `ticks_ms`: their
        tokens' scheduled_for_ms, when known (a claim then reads only their days' partitions).
        `waiting` names runs asking again after a Refused.WAIT: each is tried only once no
        earlier run of its job is still queued and due."""
        ids = list(dict.fromkeys(run_ids))
        within = window_ms(ticks_ms)
        claimed: dict[int, ClaimedRun] = {}
        refused: dict[int, Refused] = {}  # skipped by the policy, or left queued to wait
        if waiting:
            with translate_errors():
                self.round_trips += 1
                turn = {r["id"] for r in await self._pool.fetch(q.WAITERS_TURN, list(waiting))}
            refused.update((i, Refused.WAIT) for i in waiting if i not in turn)
            ids = [i for i in ids if i not in refused]

        async def attempt() -> None:  # again after a deadlock: what was claimed before stays claimed
            left = [i for i in ids if i not in claimed and i not in refused]
            with translate_errors():
                async with self._pool.acquire() as conn:
                    await self._claim(conn, left, node_id, lease_s, within, claimed, refused)

        if ids:
            await retry_contention(attempt, "claim")
        answers: list[Claim] = []
        for run_id in run_ids:
            run = claimed.pop(run_id, None)
            answers.append(run or refused.pop(run_id, Refused.NOT_QUEUED))
        return answers

    async def _claim(
        self,
        conn: Any,
        ids: list[int],
        node_id: str,
        lease_s: float,
        within: Window,
        claimed: dict[int, ClaimedRun],
        refused: dict[int, Refused],
    ) -> None:
        try:
            self.round_trips += 1
            rows = await conn.fetch(q.CLAIM_BATCH, ids, node_id, lease_s, *within)
            claimed.update((r["id"], to_struct(r, ClaimedRun)) for r in rows)
            leftover = ids if len(rows) < len(ids) else []
        except asyncpg.UniqueViolationError:
            leftover = ids  # a concurrent claim of the same job: arbitrate run by run
        if not leftover:
            return
        # Repeated tokens, or runs an exclusive policy must arbitrate: those whose job runs now are
        # answered together (a backlog of waiting runs costs a statement, not one per run); the
        # rest are arbitrated run by run.
        self.round_trips += 1
        queued = await conn.fetch(q.STILL_QUEUED, [i for i in leftover if i not in claimed], *within)
        answered: dict[Refused, list[int]] = {}
        for row in queued:
            if row["answer"] is None:
                await self._claim_one(conn, row["id"], node_id, lease_s, claimed, refused)
            else:
                answered.setdefault(Refused(row["answer"]), []).append(row["id"])
        refused.update((i, Refused.WAIT) for i in answered.pop(Refused.WAIT, []))
        for answer, run_ids in answered.items():  # skipped by the policy, while still queued
            self.round_trips += 1
            skipped = await conn.fetch(q.QUEUED_SKIP, run_ids, SKIP_REASONS[answer])
            refused.update((r["id"], answer) for r in skipped)

    async def _claim_one(
        self,
        conn: Any,
        run_id: int,
        node_id: str,
        lease_s: float,
        claimed: dict[int, ClaimedRun],
        refused: dict[int, Refused],
    ) -> None:
        """The rare path: one run the batch left queued, arbitrated by the unique index."""
        async with conn.transaction():
            self.round_trips += 1
            row = await conn.fetchrow(q.LOCK_RUN, run_id)
            if row is None or row["state"] != "queued":
                return  # claimed or finished elsewhere
            if row["exclusive"] and row["concurrency_policy"] == "replace":
                self.round_trips += 1
                replaced = [r["id"] for r in await conn.fetch(q.REPLACE_RUNNING, row["job_id"], run_id, FAIL_REPLACED)]
                if replaced:
                    log.info("older runs replaced", extra={"event": "run.replaced", "replaced": replaced})
            try:
                async with conn.transaction():  # a savepoint: a refused claim keeps the outer work
                    self.round_trips += 1
                    run = await conn.fetchrow(q.CLAIM_ONE, run_id, node_id, lease_s)
            except asyncpg.UniqueViolationError:
                self.round_trips += 2
                answer = Refused(await conn.fetchval(q.OVERLAP_DECISION, run_id))
                if answer is Refused.WAIT or await conn.fetchrow(q.QUEUED_SKIP, [run_id], SKIP_REASONS[answer]):
                    refused[run_id] = answer
                return
            if run is not None:
                claimed[run_id] = to_struct(run, ClaimedRun)

    async def overdue(self, late_s: float = 1.0, cap: int = 100_000) -> int:
        """Queued runs more than `late_s` past their due time (at most `cap`)."""
        with translate_errors():
            return int(await self._pool.fetchval(q.RUNS_OVERDUE, late_s, cap))

    async def ping(self) -> None:
        """Raises BackendUnavailable while PostgreSQL does not answer."""
        await ping(self._pool)

    async def sync_clock(self, clock: DbClock) -> None:
        """A ping that measures this node's clock against PostgreSQL's (cronos.clock)."""
        await sync_clock(self._pool, clock)

    async def extend_leases(
        self, run_ids: Sequence[int], node_id: str, lease_s: float, ticks: Sequence[datetime | None] = ()
    ) -> set[int]:
        """Heartbeat: extend the leases `node_id` still owns; returns those ids. `ticks`: their
        scheduled_for, when known."""
        if not run_ids:
            return set()
        within = window(ticks)

        async def attempt() -> list[Any]:
            with translate_errors():
                self.round_trips += 1
                return await self._pool.fetch(q.EXTEND_LEASES, list(run_ids), node_id, lease_s, *within)  # type: ignore[no-any-return]

        return {r["id"] for r in await retry_contention(attempt, "lease heartbeat")}

    async def finish(self, outcomes: Sequence[Outcome]) -> FinishResult:
        """Record outcomes (and the retries they allow) in one statement, one transaction."""
        if not outcomes:
            return FinishResult(written=set(), retried=0)

        async def attempt() -> FinishResult:
            with translate_errors():
                async with self._pool.acquire() as conn:
                    return await self._finish(conn, outcomes)

        return await retry_contention(attempt, "finish")

    async def _finish(self, conn: Any, outcomes: Sequence[Outcome]) -> FinishResult:
        outcomes = sorted(outcomes, key=lambda o: o.run_id)  # FINISH_RUNS locks in this order
        self.round_trips += 1
        try:
            rows = await conn.fetch(
                q.FINISH_RUNS,
                [o.run_id for o in outcomes],
                [o.node_id for o in outcomes],
                [o.state for o in outcomes],
                [o.error for o in outcomes],
                [o.traceback for o in outcomes],
                [o.result for o in outcomes],
                [o.duration_ms for o in outcomes],
                [o.retry_delay_s for o in outcomes],
                *window([o.scheduled_for for o in outcomes]),
            )
        except asyncpg.UniqueViolationError as exc:
            # A chain run's tick taken by another parent's finished in the same microsecond (FINISH_RUNS):
            # nothing was written; again, with a new finish instant.
            raise Contention("postgresql", f"chain run tick taken: {exc}") from exc
        if not rows:
            return FinishResult(written=set(), retried=0)
        return FinishResult(
            written={r["id"] for r in rows}, retried=int(rows[0]["retried"]), chained=int(rows[0]["chained"])
        )

    async def reap(self, epoch: int, *, limit: int = 1000) -> ReapResult:
        """Leader only, fenced by `epoch`: end runs whose executor is gone, expire stale queued runs.

        Raises NotLeader (and writes nothing) when `epoch` is no longer the current one.
        """
        async with fenced(self._pool, epoch) as conn:
            lost = await conn.fetch(q.LOST_RUNS, limit)
            outcomes = [
                Outcome(
                    run_id=r["id"],
                    node_id=r["node_id"],
                    state="failed",
                    error=FAIL_EXECUTOR_LOST,
                    retry_delay_s=lifecycle.retry_delay_s(r["attempt"], r["max_retries"], r["retry_backoff_s"]),
                    scheduled_for=r["scheduled_for"],
                )
                for r in lost
            ]
            finished = await self._finish(conn, outcomes) if outcomes else FinishResult(written=set(), retried=0)
            expired = await conn.fetch(q.EXPIRE_QUEUED, limit, SKIP_EXPIRED)
        for r in lost:
            if r["id"] in finished.written:
                metrics.RUNS.labels(state="failed", kind=r["kind"]).inc()
        metrics.EXECUTOR_LOST_RUNS.inc(len(finished.written))
        metrics.RUNS_SKIPPED.labels(reason=SKIP_EXPIRED).inc(len(expired))
        result = ReapResult(lost=len(finished.written), expired=len(expired), retried=finished.retried)
        if result.lost or result.expired:
            log.warning(
                "reaped runs",
                extra={
                    "event": "runs.reaped",
                    "epoch": epoch,
                    "lost": result.lost,
                    "expired": result.expired,
                    "retried": result.retried,
                    "lost_run_ids": sorted(finished.written)[:50],
                },
            )
        return result
