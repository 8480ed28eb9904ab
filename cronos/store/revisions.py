"""Job revisions: every change to a job, numbered, and the hand-over of its ticks written ahead.

A revision is written by `record` in the transaction of the change it describes (like the
audit entry), with the job's status after it and the fields the change set (new values,
secrets redacted). Numbers count from 1 (the creation) per job; `jobs.revision` is the newest.

The hand-over (`hand_over`) is the one place where ticks the leader wrote ahead meet a change
before they are due: under the job's row lock, in the change's transaction, each of the job's
still-queued ticks due after the change either stays (the job is active and its current
schedule fires then) or ends `skipped` with the reason (a tick an executor reserved ahead is taken
back first: queued). Executors claim only queued runs and start only runs still reserved, so a
skipped tick never starts, even when its token is already in an executor's hands; and the
leader writes no tick planned under an older schedule afterwards (jobs.plan_revision).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import asyncpg
import msgspec

from cronos import metrics
from cronos.errors import NotFound
from cronos.models import JOB_WRITABLE, SKIP_JOB_INACTIVE, SKIP_SCHEDULE_CHANGED, Job
from cronos.redact import redact_payload
from cronos.schedule import parse_schedule
from cronos.schedule_union import any_hash
from cronos.schedule_window import schedule_of
from cronos.store.db import PageBounds, job_page, to_struct, translate_errors
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import runs as runs_q
from cronos.store.queries import views as views_q

log = logging.getLogger("cronos.store.revisions")

RevisionKind = Literal["created", "updated", "paused", "resumed", "deleted", "ended"]  # ended: by the leader
RevisionStatus = Literal["active", "paused", "deleted", "completed", "expired"]

# Fields whose change gives the job a new schedule: ticks written ahead under the old one are
# handed over and the cursor moves to the change instant.
SCHEDULE_FIELDS = (
    "cron_expression", "timezone", "run_at", "start_at", "end_at", "every", "anchor", "schedules", "spread",
)  # fmt: skip


def new_schedule(changed: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """The change gives the job a new schedule: a schedule field changed, or the name of a job whose
    expression has an `H`, whose values its name picks (cronos.hashed)."""
    if any(f in changed for f in SCHEDULE_FIELDS):
        return True
    return "name" in changed and (
        bool(job.get("spread")) or any_hash(job.get("cron_expression"), job.get("schedules") or ())
    )


_TICK = timedelta(microseconds=1)
MAX_NUMBER = 2**31 - 1  # revision numbers are integers: a page cursor past this means "from the newest"


class Revision(msgspec.Struct, kw_only=True):
    job_id: int
    number: Annotated[int, msgspec.Meta(ge=1, description="1: the job's creation; runs name the one that planned them")]
    kind: RevisionKind
    at: Annotated[datetime, msgspec.Meta(description="when the change took effect (its transaction's time)")]
    actor: Annotated[str, msgspec.Meta(description="the token's name (`local` in protected mode)")]
    status: Annotated[RevisionStatus, msgspec.Meta(description="the job's status from this revision on")]
    fields: Annotated[list[str], msgspec.Meta(description="the fields this change set, sorted")]
    changes: Annotated[dict[str, Any], msgspec.Meta(description="their new values; secrets shown as ***")]


def changed_fields(before: Job, after: Mapping[str, Any]) -> dict[str, Any]:
    """The writable fields whose value in `after` differs from the stored job's: {} is a no-op."""
    return {name: after[name] for name in JOB_WRITABLE if after[name] != getattr(before, name)}


def kind_of(changes: Mapping[str, Any]) -> RevisionKind:
    """A change of the status alone is a pause or a resume; anything else an update."""
    if set(changes) == {"status"}:
        return "paused" if changes["status"] == "paused" else "resumed"
    return "updated"


def shown(kind: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """`changes` as a revision keeps them: a payload's secrets replaced by `***`."""
    out = dict(changes)
    if "payload" in out:
        out["payload"] = redact_payload(kind, out["payload"])
    return out


async def record(
    conn: asyncpg.Connection,
    job: Job,
    kind: RevisionKind,
    actor: str,
    changes: Mapping[str, Any],
    *,
    status: RevisionStatus | None = None,
) -> Revision:
    """Revision `job.revision` of `job` (the job as the change left it), on `conn`."""
    values = shown(job.kind, changes)
    row = await conn.fetchrow(
        jobs_q.REVISION_INSERT, job.id, job.revision, kind, actor, status or job.status, sorted(values), values
    )
    return to_struct(row, Revision)


def _fires_at(job: Job, instant: datetime) -> bool:
    schedule, _notice = schedule_of(job, lambda expression, zone: (parse_schedule(expression, zone), None))
    return schedule.next_after(instant - _TICK) == instant


async def hand_over(conn: asyncpg.Connection, job: Job, *, schedule_changed: bool) -> int:
    """End as skipped the job's ticks written ahead that `job` (as the change left it) would not
    run: all of them while it is paused, those its schedule does not fire at after a schedule
    change. Returns how many. Call it holding the job's row lock, after the job's UPDATE.

    First, whatever the change, the job's runs reserved by an executor and not started yet are
    taken back (queued again: cronos.lifecycle Event.TAKEN_BACK): they are then handed over as any
    tick written ahead, and their executor claims the ones that stay at their instant, with the job
    as changed (its payload, its timeout...), as it would have claimed them unreserved."""
    taken = len(await conn.fetch(runs_q.RUNS_TAKE_BACK, job.id))
    if taken:
        log.info("reserved runs taken back", extra={"event": "runs.taken_back", "job_id": job.id, "count": taken})
    if job.status == "active" and not schedule_changed:
        return 0
    ahead = await conn.fetch(views_q.RUNS_AHEAD_OF_JOB, job.id)
    if job.status == "paused":
        reason, stale = SKIP_JOB_INACTIVE, [r["id"] for r in ahead]
    else:
        reason, stale = SKIP_SCHEDULE_CHANGED, [r["id"] for r in ahead if not _fires_at(job, r["scheduled_for"])]
    if not stale:
        return 0
    skipped = len(await conn.fetch(runs_q.RUNS_SKIP_QUEUED, stale, reason))
    metrics.RUNS_SKIPPED.labels(reason=reason).inc(skipped)
    log.info(
        "ticks written ahead skipped",
        extra={"event": "ticks.handed_over", "job_id": job.id, "revision": job.revision, "reason": reason,
               "count": skipped},
    )  # fmt: skip
    return skipped


class RevisionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def of_job(
        self, job_id: int, before: int | None, limit: int, bounds: PageBounds
    ) -> tuple[list[Revision], bool]:
        """A job's revisions, newest first, large values summarised, and whether the page ended
        early at `bounds.page_bytes`; NotFound only for an id that never was a job (a deleted job
        keeps its revisions)."""
        return await job_page(
            self._pool, Revision, jobs_q.REVISIONS_OF_JOB, jobs_q.REVISION_JOB_KNOWN, job_id, before, limit, bounds
        )

    async def one(self, job_id: int, number: int) -> Revision:
        """One revision whole (its values unsummarised); NotFound when the job has none by that number."""
        with translate_errors():
            row = await self._pool.fetchrow(jobs_q.REVISION_ONE, job_id, number)
        if row is None:
            raise NotFound(f"job {job_id} has no revision {number}")
        return to_struct(row, Revision)
