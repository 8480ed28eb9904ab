"""Steps 2-3 of a token: claim its run. The common case costs one statement: CLAIM_FREE claims
the runs that cronos.lifecycle.claims_at_once says are claimed whatever else holds (nothing of
the job running, within the grace, alone in the batch). For the others, read the facts
(CLAIM_FACTS), let cronos.lifecycle decide for each (claim, wait, skip, replace, expire), and
apply each decision with its own conditional statement; no transaction: PostgreSQL's
runs_one_running_exclusive refuses a claim that a concurrent one made stale (G3).

No lost wakeup: a run recorded waiting behind a running run is woken by that run's finish, whose
wake reads (a later statement of its transaction) every wait committed before; a wait committed
after that read finds, when it looks again (`waiters.wake_free`, which blocks on the finish's
uncommitted end), that nothing runs any more, and wakes itself.

Ahead of their due time, the same runs CLAIM_FREE would claim are reserved instead (`reserve`,
the same statement, with their job's definition): at their instant their executor only starts them
(`start`, a statement that reads nothing of the job), unless the API took them back meanwhile
(a change of their job: `revisions.hand_over`; a cancel; a deletion); one it cannot start it gives back (`unreserve`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg
import msgspec

from cronos import lifecycle
from cronos.errors import Contention
from cronos.inputs import INPUT_TRIGGERS, merged_payload
from cronos.lifecycle import REFUSALS, SKIP_REASONS, Ahead, Candidate, Overlap, Refused
from cronos.models import FAIL_REPLACED, ConcurrencyPolicy, JobKind, RunState
from cronos.store import groups, waiters
from cronos.store.db import to_struct
from cronos.store.inputs import RunRef, overrides_of
from cronos.store.queries import runs as runs_q

Window = tuple[datetime | None, datetime | None]


class ClaimedRun(msgspec.Struct, kw_only=True):
    """A run this node now owns, with what the executor needs of its job."""

    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    trigger: str
    epoch: int | None
    started_at: datetime  # a reserved run's due time until its executor starts it and sets it
    due_at: datetime
    exclusive: bool
    name: str
    kind: JobKind
    payload: dict[str, Any]
    timeout_s: float
    max_retries: int
    retry_backoff_s: float
    concurrency_policy: ConcurrencyPolicy
    webhook_secret: str  # signs http runs' requests (Standard Webhooks)
    inputs: dict[str, Any] | None = None  # a manual run's payload overrides, merged into `payload` (with_inputs)
    # The job's own payload when inputs were merged into `payload`: where its secrets were entered for.
    job_payload: dict[str, Any] | None = None
    concurrency_group: str | None = None  # the group whose slot it holds (its finish frees it)
    # Reserved ahead of its due time (`reserve`): its lease's end, which its start must precede
    # (lifecycle.startable); None: claimed at its due time, started then.
    lease_until: datetime | None = None
    expires_at: datetime | None = None  # its stamped expiry (lifecycle.expiry), read when reserved


class ClaimRequest(NamedTuple):
    """A run to claim and its tick (a token's scheduled_for_ms: the claim reads that day only);
    with the run already reserved by this node, if it is."""

    run_id: int
    scheduled_for_ms: int
    reserved: ClaimedRun | None = None


Claim = ClaimedRun | Refused
_ENDED_OR_WAITING = frozenset({Refused.OVERLAP, Refused.BUFFER_FULL, Refused.EXPIRED, Refused.WAIT})


@dataclass
class ClaimPlan:
    """What the lifecycle decided for each run of a batch."""

    claim: dict[int, bool] = field(default_factory=dict)  # run id -> exclusive
    refused: dict[int, Refused] = field(default_factory=dict)
    replace: dict[int, int] = field(default_factory=dict)  # job id -> the run that replaces its running one


def _expires(row: asyncpg.Record) -> datetime:
    """A run's stamped expiry; one a leader of the release before wrote unstamped (a rolling
    upgrade) gets it from its job's grace, as lifecycle.expiry stamps it."""
    stamped: datetime | None = row["expires_at"]
    return stamped if stamped is not None else lifecycle.expiry(row["due_at"], row["misfire_grace_s"])


def plan_claims(rows: Sequence[asyncpg.Record], ids: Sequence[int]) -> ClaimPlan:
    """Decide every run of CLAIM_FACTS' rows; runs of one job in tick order, each seeing the ones
    claimed before it as running (the newest first under `replace`: it supersedes the others)."""
    plan = ClaimPlan()
    found = {r["id"] for r in rows}
    plan.refused.update((i, Refused.NOT_QUEUED) for i in ids if i not in found)
    by_job: dict[int, list[asyncpg.Record]] = defaultdict(list)
    for row in rows:
        if row["state"] != "queued":
            plan.refused[row["id"]] = Refused.NOT_QUEUED
        elif lifecycle.expired(_expires(row), row["now"]):
            plan.refused[row["id"]] = Refused.EXPIRED
        else:
            by_job[row["job_id"]].append(row)
    for job_id, runs in by_job.items():
        policy = runs[0]["policy"]
        runs.sort(key=lambda r: (r["scheduled_for"], r["attempt"]), reverse=policy == "replace")
        first = runs[0]
        ahead = None
        if first["ahead_started_at"] is not None:
            tick = first["ahead_scheduled_for"]
            on_time = lifecycle.on_time_at(job_id, tick, first["jitter_s"])
            ahead = Ahead(tick, first["ahead_started_at"], first["ahead_attempt"], on_time)
        made_wait = 0  # runs of this batch decided to wait (buffer_one counts them)
        for run in runs:
            waiting = int(run["earlier_waiting"] or 0) + made_wait
            candidate = Candidate(policy, run["scheduled_for"], run["attempt"], run["due_at"], ahead, waiting)
            decision = lifecycle.overlap(candidate, run["now"])
            if decision is Overlap.CLAIM or decision is Overlap.REPLACE:
                plan.claim[run["id"]] = lifecycle.exclusive(policy)
                if decision is Overlap.REPLACE:
                    plan.replace[job_id] = run["id"]
                if lifecycle.exclusive(policy):
                    on_time = lifecycle.on_time_at(job_id, run["scheduled_for"], run["jitter_s"])
                    ahead = Ahead(run["scheduled_for"], run["now"], run["attempt"], on_time)
            else:
                plan.refused[run["id"]] = REFUSALS[decision]
                made_wait += decision is Overlap.WAIT
    return plan


async def claim(
    pool: asyncpg.Pool, ids: Sequence[int], node_id: str, lease_s: float, within: Window,
    claimed: dict[int, ClaimedRun],
) -> tuple[dict[int, Refused], int]:  # fmt: skip
    """One claim attempt of `ids` (unique): the runs claimed go into `claimed` as each statement
    commits (an attempt that raises keeps them); the refused ones, and the statements sent.
    Raises Contention when a concurrent claim made the decision stale (try again, without the
    runs already claimed)."""
    try:  # the common case, in one statement (lifecycle.claims_at_once)
        rows = await pool.fetch(runs_q.CLAIM_FREE, ids, node_id, lease_s, *within, RunState.RUNNING)
    except asyncpg.UniqueViolationError as exc:  # another run of one of these jobs was claimed meanwhile
        raise Contention("postgresql", f"claimed concurrently: {exc}") from exc
    claimed.update((r["id"], to_struct(r, ClaimedRun)) for r in rows)
    left = [i for i in ids if i not in claimed]
    if not left:
        return {}, 1
    refused, sent = await _claim_deciding(pool, left, node_id, lease_s, within, claimed)
    return refused, sent + 1


async def _claim_deciding(
    pool: asyncpg.Pool, ids: Sequence[int], node_id: str, lease_s: float, within: Window,
    claimed: dict[int, ClaimedRun],
) -> tuple[dict[int, Refused], int]:  # fmt: skip
    """The runs that statement left: their facts, each decided by the lifecycle, then applied."""
    rows = await pool.fetch(runs_q.CLAIM_FACTS, ids, *within)
    plan = plan_claims(rows, ids)
    sent = 1
    by_id = {r["id"]: r for r in rows}
    asking = [
        groups.Asking(i, by_id[i]["job_id"], by_id[i]["scheduled_for"], by_id[i]["grp"])
        for i in plan.claim
        if by_id[i]["grp"] is not None
    ]
    try:
        for job_id, run_id in plan.replace.items():  # first: the claim would find them running
            if by_id[run_id]["grp"] is None:
                claimed.update(await _replace_and_claim(pool, plan, job_id, run_id, node_id, lease_s, within))
                sent += 2
            else:  # its slot is taken under the groups' lock, which comes before any run's: apart
                await pool.fetch(runs_q.REPLACE_RUNNING, job_id, run_id, FAIL_REPLACED)
                sent += 1
        if asking:  # runs of grouped jobs: a slot each, or they wait for their group
            sent += await _claim_grouped(pool, plan, asking, node_id, lease_s, within, claimed)
        claimed.update(await _claim_runs(pool, plan, node_id, lease_s, within))
    except asyncpg.UniqueViolationError as exc:  # another run of one of these jobs was claimed meanwhile
        raise Contention("postgresql", f"claimed concurrently: {exc}") from exc
    sent += bool(plan.claim)
    waiting = [i for i, r in plan.refused.items() if r is Refused.WAIT]
    if waiting:
        jobs = sorted({r["job_id"] for r in await pool.fetch(runs_q.RUNS_WAIT, waiting)})
        # The run they wait for may have ended before they were recorded waiting, its finish
        # finding no one to wake: look again, after any finish of those jobs has committed.
        sent += 2 + len(await waiters.wake_free(pool, jobs))
    for refusal, reason in SKIP_REASONS.items():
        skipped = [i for i, r in plan.refused.items() if r is refusal]
        if skipped:
            await pool.fetch(runs_q.RUNS_SKIP, skipped, reason)
            sent += 1
    # Runs woken with a slot that do not start after all (skipped, expired, behind their job's
    # running run): the slot goes to the group's next waiting run.
    unused = [r["id"] for r in rows if r["holds_slot"] and plan.refused.get(r["id"]) in _ENDED_OR_WAITING]
    if unused:
        async with pool.acquire() as conn, conn.transaction():
            await groups.release(conn, unused)
        sent += 4
    return plan.refused, sent


async def _replace_and_claim(
    pool: asyncpg.Pool, plan: ClaimPlan, job_id: int, run_id: int, node_id: str, lease_s: float, within: Window
) -> dict[int, ClaimedRun]:
    """Job `job_id`'s running run replaced by `run_id` and `run_id` claimed, in one transaction
    (it leaves `plan.claim`): a cancel of `run_id` meanwhile finds it queued, and nothing replaced,
    or running."""
    mine = ClaimPlan(claim={run_id: plan.claim.pop(run_id)})
    async with pool.acquire() as conn, conn.transaction():
        await conn.fetch(runs_q.REPLACE_RUNNING, job_id, run_id, FAIL_REPLACED)
        return await _claim_runs(conn, mine, node_id, lease_s, within)


async def _claim_grouped(
    pool: asyncpg.Pool, plan: ClaimPlan, asking: Sequence[groups.Asking], node_id: str, lease_s: float,
    within: Window, claimed: dict[int, ClaimedRun],
) -> int:  # fmt: skip
    """Claim the runs of grouped jobs that take a slot (cronos.store.groups, under the groups'
    lock, in one transaction with their claim); the others wait for their group. They leave
    `plan.claim` either way. Returns the statements sent."""
    group_of = {a.run_id: a.group for a in asking}
    mine = ClaimPlan(claim={a.run_id: plan.claim.pop(a.run_id) for a in asking})
    async with pool.acquire() as conn, conn.transaction():
        taken = await groups.take(conn, asking)
        mine.claim = {i: e for i, e in mine.claim.items() if i in taken.claim}
        runs = await _claim_runs(conn, mine, node_id, lease_s, within)
    for run_id, run in runs.items():
        run.concurrency_group = group_of[run_id]
    claimed.update(runs)
    plan.refused.update((i, Refused.WAIT_GROUP) for i in taken.wait)
    return taken.sent + bool(mine.claim)


async def _claim_runs(
    conn: asyncpg.Pool | asyncpg.Connection, plan: ClaimPlan, node_id: str, lease_s: float, within: Window
) -> dict[int, ClaimedRun]:
    if not plan.claim:
        return {}
    ids = sorted(plan.claim)
    rows = await conn.fetch(runs_q.CLAIM_RUNS, ids, [plan.claim[i] for i in ids], node_id, lease_s, *within)
    return {r["id"]: to_struct(r, ClaimedRun) for r in rows}


async def with_inputs(pool: asyncpg.Pool, runs: Sequence[ClaimedRun]) -> int:
    """Claimed manual runs and retries run with their inputs (cronos.inputs): their payload becomes
    the job's with the overrides applied. Scheduled and chain runs are not asked about: nothing more
    is sent for a batch without a manual run or a retry. Returns the statements sent."""
    asked = [r for r in runs if r.trigger in INPUT_TRIGGERS]
    if not asked:
        return 0
    found = await overrides_of(pool, [RunRef(r.id, r.job_id, r.scheduled_for, r.attempt) for r in asked])
    for run in asked:
        if run.id in found:
            run.inputs = found[run.id][1]
            run.job_payload = run.payload
            run.payload = merged_payload(run.kind, run.payload, run.inputs)
    return 1


async def reserve(
    pool: asyncpg.Pool, ids: Sequence[int], node_id: str, lease_s: float, within: Window
) -> dict[int, ClaimedRun]:
    """Reserve, ahead of their due time, the runs of `ids` that lifecycle.claims_at_once claims
    (CLAIM_FREE, to `reserved`); the others are left queued, to be claimed at their instant."""
    try:
        rows = await pool.fetch(runs_q.CLAIM_FREE, ids, node_id, lease_s, *within, RunState.RESERVED)
    except asyncpg.UniqueViolationError:  # a run of one of these jobs was claimed meanwhile: claim them when due
        return {}
    return {r["id"]: to_struct(r, ClaimedRun) for r in rows}


async def start(pool: asyncpg.Pool, ids: Sequence[int], node_id: str, within: Window) -> dict[int, datetime]:
    """Start, at their due instant, the runs of `ids` that `node_id` still holds reserved
    (RUNS_START: running, before their work begins); each one started, with its start. The others
    were taken back (queued again, cancelled, deleted) or released meanwhile."""
    rows = await pool.fetch(runs_q.RUNS_START, sorted(ids), node_id, *within)
    return {r["id"]: r["started_at"] for r in rows}


async def unreserve(pool: asyncpg.Pool, ids: Sequence[int], node_id: str) -> set[int]:
    """Give back runs `node_id` reserved and will not start (RUNS_UNRESERVE): queued again."""
    rows = await pool.fetch(runs_q.RUNS_UNRESERVE, sorted(ids), node_id)
    return {r["id"] for r in rows}
