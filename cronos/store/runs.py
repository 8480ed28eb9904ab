"""The executor's side of the runs ledger: claim, heartbeat, finish, and the leader's reaper.

Every write is a transition of cronos.lifecycle, conditional on its from-state (and on the
owning node, or on the leader's epoch) so that a repeated token, a paused executor or a deposed
leader changes nothing. Batches go to PostgreSQL as one statement per transition (the claim:
cronos.store.claims; the finish and its follow-ups: cronos.store.finishes), and `round_trips`
counts them for the benchmark.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from cronos import lifecycle, metrics
from cronos.clock import DbClock
from cronos.lifecycle import SKIP_REASONS, Refused
from cronos.models import SKIP_EXPIRED
from cronos.store import claims, finishes, groups, waiters
from cronos.store.claims import Claim, ClaimedRun, ClaimRequest
from cronos.store.db import ping, retry_contention, sync_clock, translate_errors
from cronos.store.epoch import fenced
from cronos.store.finishes import FinishResult, Outcome
from cronos.store.queries import runs as runs_q

__all__ = ["SKIP_REASONS", "Claim", "ClaimRequest", "ClaimedRun", "FinishResult", "Outcome", "Refused", "RunStore"]

log = logging.getLogger("cronos.store.runs")


class ReapResult(msgspec.Struct, kw_only=True):
    lost: int = 0  # running runs whose lease expired, now failed "executor lost"
    expired: int = 0  # queued or waiting runs past their misfire grace, now skipped "expired"
    retried: int = 0  # retries queued for the lost ones
    released: int = 0  # reserved runs whose lease ran out before they started, back in the outbox


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


async def _stamp_unstamped(conn: asyncpg.Connection, limit: int) -> None:
    """Pending runs a leader of the release before wrote without an expiry (a rolling upgrade)
    get it, as lifecycle.expiry stamps every new run, before the reaper judges them."""
    rows = await conn.fetch(runs_q.RUNS_UNSTAMPED, limit)
    if rows:
        expiries = [lifecycle.expiry(r["due_at"], r["misfire_grace_s"]) for r in rows]
        await conn.execute(
            runs_q.RUNS_STAMP_EXPIRY, [r["id"] for r in rows], [r["scheduled_for"] for r in rows], expiries
        )


class RunStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.round_trips = 0  # statements sent, for the benchmark's "round trips per run"

    async def claim(
        self, run_ids: Sequence[int], node_id: str, lease_s: float, ticks_ms: Sequence[int] | None = None
    ) -> list[Claim]:
        """Claim queued runs for `node_id`, each as its job's concurrency policy decides: one
        answer per id, in order (an id repeated in the batch gets the run once). `ticks_ms`: their
        tokens' scheduled_for_ms, when known (a claim then reads only their days' partitions)."""
        ids = list(dict.fromkeys(run_ids))
        within = window_ms(ticks_ms)

        claimed: dict[int, ClaimedRun] = {}  # kept across attempts: what a statement claimed stays claimed

        async def attempt() -> tuple[dict[int, Refused], int]:
            with translate_errors():
                left = [i for i in ids if i not in claimed]
                return await claims.claim(self._pool, left, node_id, lease_s, within, claimed)

        refused, sent = await retry_contention(attempt, "claim")
        with translate_errors():
            sent += await claims.with_inputs(self._pool, [claimed[i] for i in ids if i in claimed])
        self.round_trips += sent
        answers: list[Claim] = []
        for run_id in run_ids:
            run = claimed.pop(run_id, None)
            answers.append(run or refused.pop(run_id, Refused.NOT_QUEUED))
        return answers

    async def reserve(
        self, run_ids: Sequence[int], node_id: str, lease_s: float, ticks_ms: Sequence[int] | None = None
    ) -> list[ClaimedRun | None]:
        """Reserve queued runs for `node_id` ahead of their due time (claims.reserve): one answer per
        id, in order; None for a run left queued (claimed at its instant instead)."""
        ids = list(dict.fromkeys(run_ids))
        with translate_errors():
            reserved = await claims.reserve(self._pool, ids, node_id, lease_s, window_ms(ticks_ms))
        self.round_trips += 1
        return [reserved.pop(i, None) for i in run_ids]

    async def start(self, run_ids: Sequence[int], node_id: str, ticks: Sequence[datetime]) -> dict[int, datetime]:
        """Start runs `node_id` reserved, at their due instant (`ticks`: their scheduled_for): those
        still reserved, each with its start (claims.start)."""
        with translate_errors():
            started = await claims.start(self._pool, run_ids, node_id, window(ticks))
        self.round_trips += 1
        return started

    async def unreserve(self, run_ids: Sequence[int], node_id: str) -> set[int]:
        """Give back runs `node_id` reserved and will not start: queued again. Those given back."""
        with translate_errors():
            given = await claims.unreserve(self._pool, run_ids, node_id)
        self.round_trips += 1
        return given

    async def overdue(self, late_s: float = 1.0, cap: int = 100_000) -> int:
        """Queued runs more than `late_s` past their due time (at most `cap`)."""
        with translate_errors():
            return int(await self._pool.fetchval(runs_q.RUNS_OVERDUE, late_s, cap))

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
        return set(await self.beat(run_ids, node_id, lease_s, ticks))

    async def beat(
        self, run_ids: Sequence[int], node_id: str, lease_s: float, ticks: Sequence[datetime | None] = ()
    ) -> dict[int, str | None]:
        """`extend_leases`, each owned id with who asked to cancel its run (None: nobody)."""
        if not run_ids:
            return {}
        within = window(ticks)

        async def attempt() -> list[Any]:
            with translate_errors():
                self.round_trips += 1
                return await self._pool.fetch(runs_q.EXTEND_LEASES, list(run_ids), node_id, lease_s, *within)  # type: ignore[no-any-return]

        return {r["id"]: r["cancel_by"] for r in await retry_contention(attempt, "lease heartbeat")}

    async def finish(self, outcomes: Sequence[Outcome]) -> FinishResult:
        """Record outcomes, and the follow-ups they make (retries, chain runs, waiting runs woken),
        in one transaction."""
        if not outcomes:
            return FinishResult(written=set())

        async def attempt() -> FinishResult:
            with translate_errors():
                async with self._pool.acquire() as conn, conn.transaction():
                    return await finishes.finish(conn, outcomes, window([o.scheduled_for for o in outcomes]))

        self.round_trips += 4
        return await retry_contention(attempt, "finish")

    async def sweep_waiters(self, epoch: int, seen_stranded: frozenset[int] = frozenset()) -> waiters.SweepResult:
        """Leader only, fenced: decide every waiting run again (cronos.store.waiters)."""
        async with fenced(self._pool, epoch) as conn:
            result = await waiters.sweep(conn, seen_stranded)
            result.woken += await groups.sweep(conn)
        if result.skipped or result.woken:
            log.info(
                "waiting runs swept",
                extra={"event": "runs.waiters_swept", "epoch": epoch, "skipped": result.skipped, "woken": result.woken},
            )
        return result

    @staticmethod
    def _lost(row: Any) -> Outcome:
        state, error, retried = lifecycle.lost(row["cancel_by"])
        return Outcome(
            run_id=row["id"],
            node_id=row["node_id"],
            state=state.value,  # type: ignore[arg-type]
            error=error,
            retry_delay_s=lifecycle.retry_delay_s(row["attempt"], row["max_retries"], row["retry_backoff_s"])
            if retried
            else None,
            scheduled_for=row["scheduled_for"],
            holds_slot=row["holds_slot"],
        )

    async def reap(self, epoch: int, *, limit: int = 1000) -> ReapResult:
        """Leader only, fenced by `epoch`: end runs whose executor is gone (those it had reserved and
        not started go back to the outbox), expire stale queued runs.

        Raises NotLeader (and writes nothing) when `epoch` is no longer the current one.
        """
        async with fenced(self._pool, epoch) as conn:
            released = await conn.fetch(runs_q.RUNS_RELEASE, limit)
            lost = await conn.fetch(runs_q.LOST_RUNS, limit)
            outcomes = [self._lost(r) for r in lost]
            finished = await finishes.finish(conn, outcomes, window([o.scheduled_for for o in outcomes]))
            await _stamp_unstamped(conn, limit)
            expired = await conn.fetch(runs_q.EXPIRE_PENDING, limit, SKIP_EXPIRED)
            if expired:  # a run woken with a group's slot that expired frees it
                await groups.release(conn, [r["id"] for r in expired])
        for r, outcome in zip(lost, outcomes, strict=True):
            if r["id"] in finished.written:
                metrics.RUNS.labels(state=outcome.state, kind=r["kind"]).inc()
        metrics.EXECUTOR_LOST_RUNS.inc(len(finished.written))
        metrics.RUNS_SKIPPED.labels(reason=SKIP_EXPIRED).inc(len(expired))
        result = ReapResult(
            lost=len(finished.written), expired=len(expired), retried=finished.retried, released=len(released)
        )
        if result.lost or result.expired or result.released:
            log.warning(
                "reaped runs",
                extra={
                    "event": "runs.reaped",
                    "epoch": epoch,
                    "lost": result.lost,
                    "expired": result.expired,
                    "retried": result.retried,
                    "released": result.released,
                    "lost_run_ids": sorted(finished.written)[:50],
                },
            )
        return result
