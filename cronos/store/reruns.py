"""'Retry this run': another attempt of an ended run's tick, queued by the API for someone.

The store reads the facts (RERUN_FACTS), cronos.lifecycle decides (`rerun`, `rerun_of`), and one
conditional statement writes the new attempt (RERUN_INSERT: only while no attempt of the tick is
unfinished, once per tick identity), in the transaction of its audit entry and of the NOTIFY that
has the leader push it at once. The tick stays the same, so does the idempotency key
(`<job_id>:<scheduled_for>`) the task or the HTTP target sees; the attempt number goes up.
"""

from __future__ import annotations

import logging

import asyncpg
import msgspec

from cronos import lifecycle
from cronos.errors import Conflict, NotFound
from cronos.lifecycle import Rerun, RerunFacts
from cronos.models import Run, RunState
from cronos.store.audit import record
from cronos.store.db import to_struct, translate_errors
from cronos.store.jobs import Guard
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import runs as runs_q

log = logging.getLogger("cronos.store.reruns")

MAX_ID = 2**63 - 1


def _facts(row: asyncpg.Record) -> RerunFacts:
    return RerunFacts(
        job_id=row["job_id"], scheduled_for=row["scheduled_for"], attempt=row["attempt"],
        state=RunState(row["state"]), revision=row["revision"], parent_run_id=row["parent_run_id"],
        newest_attempt=row["newest_attempt"], tick_unfinished=row["unfinished_run_id"] is not None,
        grace_s=row["misfire_grace_s"],
    )  # fmt: skip


def _refusal(run_id: int, row: asyncpg.Record, verdict: Rerun) -> Conflict:
    if verdict is Rerun.NOT_ENDED:
        return Conflict(f"run {run_id} is {row['state']}: only a run that ended can be retried")
    if verdict is Rerun.COMPLETED:
        return Conflict(f"run {run_id} completed: trigger job {row['job_id']} for a new run instead")
    return Conflict(f"run {run_id}: a newer attempt of its tick (run {row['unfinished_run_id']}) has not ended yet")


async def retry_run(pool: asyncpg.Pool, run_id: int, *, actor: str, guard: Guard) -> Run:
    """Queue the next attempt of run `run_id`'s tick, due now; NotFound, or Conflict (409) when
    cronos.lifecycle.rerun refuses. `guard` gets the job's kind first (403 for shell without admin)."""
    if run_id > MAX_ID:
        raise NotFound(f"run {run_id} not found")
    with translate_errors():
        for _attempt in range(2):  # a concurrent retry took the attempt number: read the facts again
            async with pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(runs_q.RERUN_FACTS, run_id)
                if row is None:
                    raise NotFound(f"run {run_id} not found")
                guard(row["kind"])
                facts = _facts(row)
                verdict = lifecycle.rerun(facts)
                if verdict is not Rerun.QUEUE:
                    raise _refusal(run_id, row, verdict)
                new = lifecycle.rerun_of(facts, row["now"])
                inserted = await conn.fetchrow(
                    runs_q.RERUN_INSERT, new.job_id, new.scheduled_for, new.attempt, new.due_at, new.revision,
                    new.parent_run_id, new.expires_at,
                )  # fmt: skip
                if inserted is None:
                    continue
                run = to_struct(inserted, Run)
                detail = {"run_id": run_id, "retry_run_id": run.id, "attempt": run.attempt,
                          "scheduled_for": run.scheduled_for.isoformat()}  # fmt: skip
                await record(conn, actor, "job", "run_retried", job_id=run.job_id, detail=detail)
                await conn.execute(
                    notifications_q.NOTIFY, msgspec.json.encode({"op": "retry", "job_id": run.job_id}).decode()
                )
            log.info(
                "run retried",
                extra={"event": "run.retried", "job_id": run.job_id, "run_id": run.id, "retried_run_id": run_id,
                       "attempt": run.attempt, "actor": actor},
            )  # fmt: skip
            return run
    raise Conflict(f"run {run_id}: another attempt of its tick was queued at the same time; try again")
