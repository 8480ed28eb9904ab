"""Step 5 of a token, and the reaper's: record how runs ended, then write their follow-ups.

FINISH_RUNS records the outcomes alone (completed, failed, lost: the owner-guarded transition).
In the same transaction, FOLLOW_UP_FACTS (a later statement: it sees every wait committed before
the finish could end its run) reads what the follow-ups are decided on, cronos.lifecycle decides
them, and each is written by its own statement: the next attempts and the chain runs (RUNS_QUEUE),
the runs waiting behind an ended one (RUNS_WAKE, or RUNS_SKIP when a forbid wait ran out), and a
NOTIFY so the leader's outbox pushes the new queued runs at once. What the recorded runs used
(cronos.run_usage), when their executor measured it, goes to run_usage by a statement of its own
(USAGE_WRITE): FINISH_RUNS keeps its columns.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec

from cronos import chains, lifecycle
from cronos.lifecycle import Ahead, Edge, Ended, NewRun
from cronos.models import RunState
from cronos.run_usage import Usage
from cronos.store import groups, joins
from cronos.store.db import columns
from cronos.store.joins import JoinChild
from cronos.store.queries import runs as runs_q
from cronos.store.queries import usage as usage_q
from cronos.store.waiters import WAITERS_PER_JOB, notify, wake_behind

CHAIN_TICK_TRIES = 5


class Outcome(msgspec.Struct, kw_only=True):
    """The end of one run, written only while `node_id` still owns it."""

    run_id: int
    node_id: str
    state: Literal["completed", "failed", "cancelled"]  # cancelled: its executor stopped it (lifecycle STOPPED)
    error: str | None = None
    traceback: str | None = None
    result: str | None = None
    duration_ms: float | None = None  # None: computed from started_at
    retry_delay_s: float | None = None  # None: no retry
    scheduled_for: datetime | None = None  # the run's tick, when known: the write looks in its day only
    holds_slot: bool = False  # a slot of its job's concurrency group, which its end frees (cronos.store.groups)
    usage: Usage | None = None  # what its work used, as its executor measured it (None: a reaped run)


class FinishResult(msgspec.Struct, kw_only=True):
    written: set[int]  # run ids whose outcome was recorded (the others were not ours any more)
    retried: int = 0
    chained: int = 0  # runs queued for child jobs (chains and joins) by the ends of their parents' ticks
    woken: int = 0  # waiting runs woken by the ends


async def finish(
    conn: Any, outcomes: Sequence[Outcome], within: tuple[datetime | None, datetime | None]
) -> FinishResult:
    """In the caller's transaction: the outcomes (sorted by run id: locks in id order), then their follow-ups."""
    if not outcomes:
        return FinishResult(written=set())
    outcomes = sorted(outcomes, key=lambda o: o.run_id)
    rows = await conn.fetch(runs_q.FINISH_RUNS, *columns(outcomes, _OUTCOME), *within)
    if not rows:
        return FinishResult(written=set())
    await _write_usage(conn, outcomes, rows)
    delays = {o.run_id: o.retry_delay_s for o in outcomes}
    ended = [_ended(r, delays.get(r["id"])) for r in rows]
    exclusive = {r["job_id"]: r for r in rows if r["exclusive"]}
    finals = [e for e in ended if chains.final(e.state, e.retry_delay_s is not None)]
    parents = sorted({e.job_id for e in finals})
    facts = await conn.fetch(runs_q.FOLLOW_UP_FACTS, parents, sorted(exclusive), WAITERS_PER_JOB)
    children: dict[int, list[Edge]] = defaultdict(list)
    joined: dict[int, list[JoinChild]] = defaultdict(list)
    waiters: dict[int, list[Any]] = defaultdict(list)
    for f in facts:
        if f["kind"] != "child":
            waiters[f["job_id"]].append(f)
        elif chains.joins(chain := joins.chain_of(f["chain"])):
            joined[f["job_id"]].append(
                JoinChild(f["child_id"], f["child_revision"], tuple(f["child_parents"]), chain, f["child_grace_s"])
            )
        else:
            edge = Edge(f["child_id"], f["child_revision"], f["child_grace_s"], chains.edge_on(chain, f["job_id"]))
            children[f["job_id"]].append(edge)
    retries = [r for r in map(lifecycle.retry_of, ended) if r is not None]
    result = FinishResult(written={e.id for e in ended}, retried=len(retries))
    if retries:
        await conn.fetch(runs_q.RUNS_QUEUE, *_columns(retries))
    chained = lifecycle.chain_runs(ended, children)
    result.chained = await _queue_chains(conn, chained)
    joins_queued = await joins.arrive(conn, finals, joined, rows[0]["finished_at"]) if joined else []
    result.chained += len(joins_queued)
    ahead = {
        job: Ahead(r["scheduled_for"], r["started_at"] or r["finished_at"], r["attempt"])
        for job, r in exclusive.items()
    }
    woken = await wake_behind(conn, waiters, ahead, rows[0]["finished_at"])
    result.woken = len(woken)
    slotted = [o.run_id for o in outcomes if o.holds_slot and o.run_id in result.written]
    if slotted:  # runs of grouped jobs only: their slots go to their groups' next waiting runs (told there)
        result.woken += len(await groups.release(conn, slotted))
    ops = [("retry", r.job_id) for r in retries] + [("chain", r.job_id) for r in chained] + joins_queued
    ops += [("woken", job) for job in woken]
    await notify(conn, ops)
    return result


async def _write_usage(conn: Any, outcomes: Sequence[Outcome], rows: Sequence[Any]) -> None:
    """The usage of the recorded runs that carry one (one statement, or none)."""
    ticks = {r["id"]: r["scheduled_for"] for r in rows}
    measured = [(o, o.usage) for o in outcomes if o.usage is not None and o.run_id in ticks]
    if not measured:
        return
    await conn.execute(
        usage_q.USAGE_WRITE,
        [o.run_id for o, _ in measured],
        [ticks[o.run_id] for o, _ in measured],
        *(list(column) for column in zip(*(_usage_row(u) for _, u in measured), strict=True)),
    )


def _usage_row(usage: Usage) -> tuple[Any, ...]:
    return usage.wall_ms, usage.cpu_ms, usage.cpu_user_ms, usage.cpu_sys_ms, usage.max_rss_bytes


_STATES = {state.value: state for state in RunState}  # a dict look-up: RunState(value) costs a µs a run


def _ended(row: Any, retry_delay_s: float | None) -> Ended:
    return Ended(
        row["id"], row["job_id"], row["scheduled_for"], row["attempt"], _STATES[row["state"]], row["finished_at"],
        row["revision"], row["parent_run_id"], retry_delay_s, row["due_at"], row["expires_at"],
    )  # fmt: skip


async def _queue_chains(conn: Any, runs: list[NewRun]) -> int:
    """Write chain runs; a tick taken by another parent's chain run of the same child (finished
    in the same ms, in another transaction) moves a ms on, here, without failing the finish."""
    queued = 0
    for _ in range(CHAIN_TICK_TRIES):
        if not runs:
            break
        written = {(r["job_id"], r["parent_run_id"]) for r in await conn.fetch(runs_q.RUNS_QUEUE, *_columns(runs))}
        queued += len(written)
        step = timedelta(milliseconds=len(runs))
        runs = [_moved(r, step) for r in runs if (r.job_id, r.parent_run_id) not in written]
    return queued


_OUTCOME = ("run_id", "node_id", "state", "error", "traceback", "result", "duration_ms")  # FINISH_RUNS
# RUNS_QUEUE's
_NEW_RUN = (
    "job_id", "scheduled_for", "attempt", "trigger", "due_at", "revision", "parent_run_id", "expires_at", "host_of",
)  # fmt: skip


def _moved(run: NewRun, step: timedelta) -> NewRun:
    """A chain run whose tick was taken, a step later: its due time and expiry with it."""
    expires = None if run.expires_at is None else run.expires_at + step
    tick, due = run.scheduled_for + step, run.due_at + step
    return dataclasses.replace(run, scheduled_for=tick, due_at=due, expires_at=expires)


def _columns(runs: Sequence[NewRun]) -> list[list[Any]]:
    return columns(runs, _NEW_RUN)
