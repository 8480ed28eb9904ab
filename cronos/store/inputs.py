"""Run now with inputs: the API's manual run with payload overrides and/or a past tick's logical
date, and the executor's read of a claimed run's overrides (cronos.inputs decides; this applies).

The run, its `run_inputs` row, its audit entry (the overrides, redacted) and the leader's NOTIFY are
written in one transaction. The executor asks only about manual runs and retries, in one
statement per claimed batch that holds any: scheduled and chain runs cost nothing more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from cronos import inputs, lifecycle
from cronos.errors import Conflict, NotFound
from cronos.models import Job, Run
from cronos.redact import redact_payload
from cronos.store.audit import record
from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import runs as runs_q

log = logging.getLogger("cronos.store.inputs")

# Given the job read in the trigger's transaction: its overrides, checked (raises InvalidInput).
CheckOverrides = Callable[[Job], dict[str, Any] | None]
Guard = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Rerun:
    """A re-run's logical date, and tick_refusal's answer for it (None: a tick of the schedule)."""

    tick: datetime
    refusal: str | None


async def trigger(
    pool: asyncpg.Pool, job_id: int, check: CheckOverrides, rerun: Rerun | None, *, actor: str, guard: Guard
) -> tuple[Run, dict[str, Any] | None]:
    """Queue one manual run with inputs (leader pushes it); the run and its overrides as shown."""
    with translate_errors():
        async with pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(jobs_q.JOB_GET_KEY_SHARE, job_id)
            if row is None:
                raise NotFound(f"job {job_id} not found")
            job = to_struct(row, Job)
            guard(job.kind)  # 403 before the 422s
            overrides = check(job)
            if rerun is None:
                row = await conn.fetchrow(runs_q.RUN_INSERT_MANUAL, job_id, lifecycle.grace(job.misfire_grace_s))
            else:
                await conn.execute(runs_q.RERUN_LOCK, job_id)
                facts = await conn.fetchrow(runs_q.TICK_RERUN_FACTS, job_id, rerun.tick)
                attempt = inputs.rerun_attempt(job_id, rerun.tick, facts["last"], facts["unfinished"], rerun.refusal)
                row = await conn.fetchrow(
                    runs_q.RUN_INSERT_RERUN, job_id, rerun.tick, attempt, lifecycle.grace(job.misfire_grace_s)
                )
            if row is None:  # the tick identity was taken meanwhile (the leader wrote that tick)
                raise Conflict(f"job {job_id}: could not queue the run (its tick was taken meanwhile), try again")
            run = to_struct(row, Run)
            await conn.execute(
                runs_q.RUN_INPUTS_INSERT, job_id, run.scheduled_for, run.attempt, run.id, job.kind, overrides, actor
            )
            shown = None if overrides is None else redact_payload(job.kind, overrides)
            detail = {"run_id": run.id, "scheduled_for": run.scheduled_for, "attempt": run.attempt,
                      "payload": shown}  # fmt: skip
            await record(conn, actor, "job", "triggered", job_id=job_id, detail=detail)
            await conn.execute(
                notifications_q.NOTIFY, msgspec.json.encode({"op": "triggered", "job_id": job_id}).decode()
            )
    log.info(
        "job triggered with inputs",
        extra={"event": "job.triggered", "job_id": job_id, "run_id": run.id, "actor": actor,
               "attempt": run.attempt, "overrides": sorted(overrides or ())},
    )  # fmt: skip
    return run, shown


class RunRef(msgspec.Struct, frozen=True):
    """A run whose inputs are asked for: its identity."""

    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int


async def overrides_of(
    conn: asyncpg.Pool | asyncpg.Connection, runs: Sequence[RunRef]
) -> dict[int, tuple[str, dict[str, Any]]]:
    """The overrides (and the kind they were checked for) of those of `runs` that have some."""
    if not runs:
        return {}
    rows = await conn.fetch(
        runs_q.RUN_INPUTS_OF,
        [r.id for r in runs], [r.job_id for r in runs], [r.scheduled_for for r in runs], [r.attempt for r in runs],
    )  # fmt: skip
    return {row["id"]: (row["kind"], row["payload"]) for row in rows}


async def shown_overrides(pool: asyncpg.Pool, run: Run) -> dict[str, Any] | None:
    """A run's overrides as the API shows them (secrets as ***); None for a run without."""
    if run.trigger not in inputs.INPUT_TRIGGERS:
        return None
    with translate_errors():
        found = await overrides_of(pool, [RunRef(run.id, run.job_id, run.scheduled_for, run.attempt)])
    if run.id not in found:
        return None
    kind, overrides = found[run.id]
    return redact_payload(kind, overrides)
