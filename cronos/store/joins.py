"""Joins applied (issue 40, item 5): cronos.chains decides, this writes what it decides.

A parent's final outcome for a tick arrives at each of its join children in the finish that
records it (`arrive`, in the finish's transaction, after FOLLOW_UP_FACTS found the children): one
row per (child, logical tick) in chain_joins gathers the arrivals under its row lock, and a join
that can decide does so there. A join still waiting at its deadline is decided by the leader
(`JoinStore.decide_due`, fenced by its epoch). Either way `_apply` writes the decision: the child's
run (queued, or skipped with its reason) at the join's tick, attempt 1 — so the ledger's unique
tick identity backs "exactly one child run per (child, logical tick)" — and the join's row says
what it did, why, and which parent runs it waited for (GET /api/jobs/{id}/joins).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from cronos import chains, lifecycle
from cronos.chains import Arrival, Decision, Join
from cronos.lifecycle import Ended
from cronos.models import Chain, RunState
from cronos.store.db import translate_errors
from cronos.store.epoch import fenced
from cronos.store.queries import joins as joins_q
from cronos.store.queries import runs as runs_q
from cronos.store.waiters import notify

DROPPED_INACTIVE = "the child job is not active"
DROPPED_TAKEN = "the child's run of this tick already exists"
DROPPED_NO_JOIN = "the child no longer joins its parents"


@dataclass(frozen=True, slots=True)
class JoinChild:
    """A child job that joins its parents, as a parent's finish reads it (FOLLOW_UP_FACTS)."""

    child: int
    revision: int
    parents: tuple[int, ...]
    chain: Chain
    grace_s: float  # its misfire grace: its run's expiry (lifecycle.expiry)


@dataclass(frozen=True, slots=True)
class _Decided:
    child: int
    tick: datetime
    decision: Decision
    revision: int
    parent_run_id: int  # the arrival that decided it (the latest one at a timeout)
    grace_s: float  # the child's misfire grace


def chain_of(value: Any) -> Chain | None:
    """A job's `chain` column (jsonb, decoded) as the Struct."""
    return None if value is None else msgspec.convert(value, Chain)


def _arrivals(row: Any) -> list[Arrival]:
    return [
        Arrival(parent, run, RunState(state))
        for parent, run, state in zip(row["arrived"], row["runs"], row["outcomes"], strict=True)
    ]


async def arrive(
    conn: Any, finals: Sequence[Ended], joined: Mapping[int, Sequence[JoinChild]], now: datetime
) -> list[tuple[str, int]]:
    """In a finish's transaction: the final outcomes `finals` arrive at the joins of the children
    `joined` (parent job id -> its join children); the joins that can decide now do. Returns the
    notifications of the runs queued."""
    arrivals = [
        (c.child, run.scheduled_for, run.job_id, run.id, run.state.value, chains.deadline(run.finished_at, c.chain))
        for run in finals
        for c in joined.get(run.job_id, ())
    ]
    if not arrivals:
        return []
    rows = await conn.fetch(joins_q.JOIN_ARRIVE, *(list(col) for col in zip(*arrivals, strict=True)))
    children = {c.child: c for of_parent in joined.values() for c in of_parent}
    decided = []
    for row in rows:
        child = children[row["child_id"]]
        decision = chains.decide(child.parents, child.chain, _arrivals(row), timed_out=False)
        if decision.join is not Join.WAIT:
            decided.append(_Decided(child.child, row["tick"], decision, child.revision, row["runs"][-1], child.grace_s))
    return await _apply(conn, decided, [], now)


async def _apply(
    conn: Any, decided: Sequence[_Decided], dropped: Sequence[tuple[int, datetime, str]], now: datetime
) -> list[tuple[str, int]]:
    """Write the decisions (the child runs, then the joins' rows) and those dropped (no run)."""
    made: dict[tuple[int, datetime], int] = {}
    if decided:
        rows = await conn.fetch(
            runs_q.RUNS_JOIN,
            [d.child for d in decided],
            [d.tick for d in decided],
            ["queued" if d.decision.join is Join.RUN else "skipped" for d in decided],
            [now] * len(decided),
            [d.revision for d in decided],
            [d.parent_run_id for d in decided],
            [d.decision.reason for d in decided],
            [lifecycle.expiry(now, d.grace_s) for d in decided],
        )
        made = {(r["job_id"], r["scheduled_for"]): r["id"] for r in rows}
    marks = [
        (d.child, d.tick, "ran" if d.decision.join is Join.RUN else "skipped", d.decision.reason, made[key])
        if (key := (d.child, d.tick)) in made
        else (d.child, d.tick, "dropped", DROPPED_TAKEN, None)
        for d in decided
    ]
    marks += [(child, tick, "dropped", why, None) for child, tick, why in dropped]
    if marks:
        await conn.execute(joins_q.JOIN_DECIDE, *(list(col) for col in zip(*marks, strict=True)))
    return [("chain", d.child) for d in decided if d.decision.join is Join.RUN and (d.child, d.tick) in made]


class JoinRecord(msgspec.Struct, kw_only=True):
    """A join of one logical tick of a child job: which parent runs ended it, and what it did."""

    tick: datetime
    parents: list[int]  # the parent jobs, in the order their outcomes arrived
    runs: list[int]  # their runs
    outcomes: list[str]  # their outcomes
    opened_at: datetime
    deadline: datetime
    decided: str | None  # ran, skipped, dropped; None: still waiting
    decided_at: datetime | None
    reason: str | None
    run_id: int | None  # the child's run it made


class JoinStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def next_deadline(self) -> datetime | None:
        with translate_errors():
            deadline: datetime | None = await self._pool.fetchval(joins_q.JOIN_NEXT_DEADLINE)
        return deadline

    async def decide_due(self, epoch: int, limit: int, now: datetime) -> int:
        """The leader decides up to `limit` joins past their deadline (NotLeader unless `epoch` is
        current); returns how many."""
        async with fenced(self._pool, epoch) as conn:
            rows = await conn.fetch(joins_q.JOINS_DUE, limit)
            decided, dropped = [], []
            for row in rows:
                chain = chain_of(row["chain"])
                if row["status"] != "active" or not chains.joins(chain):
                    why = DROPPED_INACTIVE if row["status"] != "active" else DROPPED_NO_JOIN
                    dropped.append((row["child_id"], row["tick"], why))
                    continue
                decision = chains.decide(row["parents"], chain, _arrivals(row), timed_out=True)
                decided.append(
                    _Decided(
                        row["child_id"], row["tick"], decision, row["revision"], row["runs"][-1], row["misfire_grace_s"]
                    )
                )
            await notify(conn, await _apply(conn, decided, dropped, now))
        return len(rows)

    async def forget(self, epoch: int, before: datetime, limit: int) -> int:
        """The leader deletes up to `limit` joins decided before `before`; returns how many."""
        async with fenced(self._pool, epoch) as conn:
            status: str = await conn.execute(joins_q.JOINS_FORGET, before, limit)
        return int(status.split()[-1])

    async def of_job(self, job_id: int, limit: int) -> list[JoinRecord]:
        with translate_errors():
            rows = await self._pool.fetch(joins_q.JOINS_OF_JOB, job_id, limit)
        return [msgspec.convert(dict(r), JoinRecord) for r in rows]
