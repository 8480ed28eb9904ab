"""The circuit breaker's fenced steps (issue 40; decisions in cronos.breaker, statements in
cronos.store.queries.breaker).

The leader reads the active jobs failing in a row (job_health, kept by the health evaluator), asks
cronos.breaker with each job's threshold, and pauses those it trips as a pause by hand does: a
revision and an audit entry by the `dispatcher`, the note saying why, and a `paused_by_breaker` job
event that notification channels can hear. It then tends the jobs it holds paused: a canary run
every M ticks (a revision of the note, an audit entry, `canary_by_breaker`), and the resume after
one completed (a revision, an audit entry, `resumed_by_breaker`). Nothing here is on the run path.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from cronos import breaker, lifecycle
from cronos.events import JobEvent, JobEventKind
from cronos.models import Job
from cronos.schedule_window import schedule_of
from cronos.store import revisions
from cronos.store.audit import record, snapshot
from cronos.store.db import to_struct
from cronos.store.epoch import fenced
from cronos.store.events import insert_events
from cronos.store.queries import breaker as breaker_q
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import runs as runs_q

log = logging.getLogger("cronos.store.breaker")

LEADER = "dispatcher"  # the actor of the breaker's steps


def _facts(row: asyncpg.Record) -> breaker.Facts:
    last = None if row["tripped_at"] is None else breaker.Trip(row["tripped_at"], row["tripped_streak"])
    return breaker.Facts(row["status"], row["consecutive_failures"], row["last_success_at"], last)


async def _set(
    conn: asyncpg.Connection, current: Job, status: str, note: str | None, action: str, detail: Mapping[str, Any]
) -> Job:
    """One step of the breaker on a job locked in `conn`: its status and note, a revision, the
    hand-over of its ticks, an audit entry and the leader's NOTIFY, as a pause or resume by hand
    writes them (the caller writes the job event: `_tell`)."""
    row = await conn.fetchrow(jobs_q.JOB_SET_STATUS, current.id, status, current.revision + 1, None, note)
    job = to_struct(row, Job)
    if status == "paused":
        await revisions.record(conn, job, "paused", LEADER, {"status": "paused", "pause_note": note})
    else:
        await revisions.record(conn, job, "resumed", LEADER, {"status": status})
    await revisions.hand_over(conn, job, schedule_changed=False)
    await record(
        conn, LEADER, "job", action, job_id=job.id, before=snapshot(current), after=snapshot(job),
        detail={"breaker": dict(detail)},
    )  # fmt: skip
    op = "paused" if status == "paused" else "resumed"
    await conn.execute(notifications_q.NOTIFY, _op(op, job.id))
    return job


def _op(op: str, job_id: int) -> str:
    return msgspec.json.encode({"op": op, "job_id": job_id}).decode()


async def _tell(
    conn: asyncpg.Connection, job: Job, kind: JobEventKind, at: datetime, run_id: int | None, detail: dict[str, Any]
) -> None:
    """The step's job event, once per revision the step made."""
    await insert_events(conn, [JobEvent(job.id, kind, at, f"{kind}:{job.id}:{job.revision}", run_id, detail)])


async def trip_due(
    pool: asyncpg.Pool,
    epoch: int,
    default: int,
    now: datetime,
    *,
    after: int = 0,
    limit: int = 100,
    queues: breaker.QueueDefaults = breaker.NO_DEFAULTS,
) -> tuple[list[Job], int | None]:
    """Pause the jobs of one page (ids above `after`) the breaker trips, each at its own threshold
    (else its queue's in `queues`, else `default`: the cluster's); returns them and the id to read
    on from (None: the last page).
    NotLeader unless `epoch` is current."""
    paused: list[Job] = []
    async with fenced(pool, epoch) as conn:
        rows = await conn.fetch(breaker_q.CANDIDATES, limit, after)
        for row in rows:
            facts = _facts(row)
            current = to_struct(row, Job)
            queue_default = breaker.of_queue(queues, current.queue)
            threshold = breaker.threshold(current.expectations, default, queue_default)
            if not breaker.trips(facts, threshold):
                continue
            if await conn.fetchval(breaker_q.JOB_LOCK_AT, current.id, current.revision) is None:
                continue
            every = breaker.canary_every(current.expectations, queue_default)
            note = breaker.pause_note(facts, threshold, every)
            detail = {"consecutive_failures": facts.streak, "threshold": threshold, "pause_note": note}
            if every:
                detail["canary_every"] = every
            job = await _set(conn, current, "paused", note, "paused", detail)
            await _tell(conn, job, JobEventKind.PAUSED_BY_BREAKER, row["last_failure_at"] or now, None, detail)
            await conn.execute(breaker_q.TRIP_RECORD, job.id, now, facts.streak, job.revision)
            paused.append(job)
    return paused, (rows[-1]["id"] if len(rows) == limit else None)


def ticks_after(job: Job, since: datetime, now: datetime, most: int) -> list[datetime]:
    """The job's ticks after `since` up to `now`, at most `most` of them."""
    schedule, _notice = schedule_of(job)
    out: list[datetime] = []
    at = since
    while len(out) < most and (at := schedule.next_after(at)) <= now:
        out.append(at)
    return out


async def _hold(conn: asyncpg.Connection, row: asyncpg.Record, every: int, ticks: int) -> breaker.Hold:
    """The facts of a held job for cronos.breaker.step: with its canary's state, if one is out."""
    if row["canary_run_id"] is None:
        return breaker.Hold(every, ticks)
    canary = await conn.fetchrow(breaker_q.CANARY_STATE, row["id"], row["canary_tick"], row["canary_run_id"])
    if canary is None:
        return breaker.Hold(every, ticks, "gone")
    return breaker.Hold(every, ticks, str(canary["state"]), canary["counted"])


async def tend_held(
    pool: asyncpg.Pool,
    epoch: int,
    now: datetime,
    *,
    after: int = 0,
    limit: int = 100,
    queues: breaker.QueueDefaults = breaker.NO_DEFAULTS,
) -> tuple[list[tuple[Job, breaker.Step]], int | None]:
    """One page of the jobs the breaker paused: let go those someone else touched, and take the
    step cronos.breaker.step says for the others; returns the steps taken (but waits) and the id to
    read on from (None: the last page). NotLeader unless `epoch` is current."""
    taken: list[tuple[Job, breaker.Step]] = []
    async with fenced(pool, epoch) as conn:
        rows = await conn.fetch(breaker_q.HELD, limit, after)
        for row in rows:
            current = to_struct(row, Job)
            if not breaker.holds(current.status, current.revision, row["held_revision"]):
                await conn.execute(breaker_q.HOLD_SET, current.id, None, None, None, None)
                continue
            every = breaker.canary_every(current.expectations, breaker.of_queue(queues, current.queue))
            ticks = ticks_after(current, row["counted_from"], now, every) if every else []
            step = breaker.step(await _hold(conn, row, every, len(ticks)))
            detail: dict[str, Any] = {"canary_every": every, "run_id": row["canary_run_id"]}
            if step == "canary":  # the revision first: the canary names the one that let it through
                tick = ticks[-1]
                note = breaker.canary_note(current.pause_note, tick)
                detail["scheduled_for"] = tick.isoformat()
                job = await _set(conn, current, "paused", note, "triggered", detail)
                run_id = await conn.fetchval(runs_q.CANARY_INSERT, job.id, tick, lifecycle.grace(job.misfire_grace_s))
                await _tell(conn, job, JobEventKind.CANARY_BY_BREAKER, now, run_id, detail | {"run_id": run_id})
                if run_id is not None:  # the leader's ticker pushes it as it pushes a manual run
                    await conn.execute(notifications_q.NOTIFY, _op("triggered", job.id))
                # No run (its attempt taken meanwhile): held as it is, the next pass tries again.
                since = row["counted_from"] if run_id is None else tick
                await conn.execute(breaker_q.HOLD_SET, job.id, job.revision, since, run_id, tick)
            elif step == "resume":
                job = await _set(conn, current, "active", None, "resumed", detail)
                await _tell(conn, job, JobEventKind.RESUMED_BY_BREAKER, now, row["canary_run_id"], detail)
                await conn.execute(breaker_q.HOLD_SET, job.id, None, None, None, None)
            elif step == "rearm":  # count M ticks afresh from the failed canary's tick
                job = current
                await conn.execute(breaker_q.HOLD_SET, job.id, job.revision, row["canary_tick"], None, None)
            else:
                continue
            taken.append((job, step))
    return taken, (rows[-1]["id"] if len(rows) == limit else None)
