"""POST /api/jobs/{id}/backfill: queue runs for a job's past ticks in [from, to) (issue 25, item 3).

The ticks come from the job's revisions as the ticks API computes them (cronos.ticks, on the API's
compute thread), are chosen by mode and paced by cronos.backfill, and queued by
cronos.store.backfill: each run keeps its tick's `scheduled_for` (so its idempotency key), takes
the tick's next free attempt, trigger `backfill`. Scope write; admin for a shell job or a job whose
chain runs one (as a trigger). A dry run answers the same list and writes nothing. Audited.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import msgspec
from aiohttp import web
from msgspec import Meta

from api.bodies import check_instant, decode, path_id, respond, utc_now
from api.compute import off_loop
from api.routes_jobs import JOB, _authorize
from api.routes_ticks import MAX_REVISIONS
from api.routing import BODY_ERRORS, DB_ERRORS, Route
from api.state import BACKENDS
from cronos import backfill
from cronos.backfill import MAX_PACE_PER_S, MAX_TICKS, MIN_PACE_PER_S, BackfillTick, Mode
from cronos.errors import Conflict, InvalidInput, NotFound, TooManyRequests
from cronos.store import backfill as store_backfill
from cronos.store.revisions import Revision
from cronos.store.ticks import TickStore
from cronos.ticks import segments

_US = timedelta(microseconds=1)
_FIRST_DAY = datetime(1, 1, 2, tzinfo=UTC)


class BackfillBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    from_: Annotated[datetime, Meta(tz=True, description="the first instant of the range (ticks at or after it)")] = (
        msgspec.field(name="from")
    )
    to: Annotated[datetime, Meta(tz=True, description="the end of the range (ticks before it); not after now")]
    mode: Annotated[
        Mode,
        Meta(description="missing: ticks no run of which ever started; failed: ticks whose last attempt failed; all"),
    ] = "missing"
    dry_run: Annotated[bool, Meta(description="list the ticks it would queue, with their state; write nothing")] = False
    pace: (
        Annotated[
            float,
            Meta(ge=MIN_PACE_PER_S, le=MAX_PACE_PER_S, description="runs released per second (default: the job's "
                 "catchup_max_per_s, else CRONOS_CATCHUP_MAX_PER_S)"),
        ]
        | None
    ) = None  # fmt: skip


class BackfillOut(msgspec.Struct, kw_only=True):
    """The ticks the backfill chose, oldest first (queued, or would be in a dry run)."""

    job_id: int
    mode: Mode
    dry_run: bool
    pace: Annotated[float, Meta(description="runs released per second")]
    ticks: Annotated[int, Meta(description="the job's ticks in the range, as its schedule was then")]
    queued: Annotated[int, Meta(description="runs queued (in a dry run: that would be)")]
    items: list[BackfillTick]


def _plan(history: list[Revision], start: datetime, end: datetime, now: datetime) -> list[datetime]:
    return backfill.ticks(segments(history), start, end, now)


async def backfill_job(request: web.Request) -> web.Response:
    job_id = path_id(request)
    principal, guard, _check = await _authorize(request, "backfill", job_id)
    body = await decode(request, BackfillBody)
    now = utc_now()
    start = check_instant(body.from_, "$.from").astimezone(UTC)
    end = check_instant(body.to, "$.to").astimezone(UTC)
    backfill.check_range(start, end, now)
    start = max(start, _FIRST_DAY)  # no job ticks on the calendar's first day: `start - 1 us` stays computable
    backends = request.app[BACKENDS]
    pool = await backends.pool()
    history, _cursor = await TickStore(pool).history(job_id, start - _US, end, MAX_REVISIONS + 1)
    if sum(revision.at >= start for revision in history) > MAX_REVISIONS:
        raise InvalidInput("$.to", f"the range holds more than {MAX_REVISIONS} changes of this job: narrow it")
    planned = await off_loop(_plan, history, start, end, now)
    settings = backends.settings
    limits = backfill.Limits(
        max_runs=settings.backfill_max_runs,
        max_per_s=settings.backfill_max_per_s,
        max_active_per_job=settings.backfill_max_active_per_job,
        max_active_per_caller=settings.backfill_max_active_per_token,
    )
    ask = store_backfill.Request(job_id, start, end, body.mode, planned, body.pace, body.dry_run, limits)
    pace, chosen = await store_backfill.run(pool, ask, now, settings.catchup_max_per_s, actor=principal.name,
                                            guard=guard)  # fmt: skip
    queued = sum(t.action == "queue" for t in chosen)
    out = BackfillOut(job_id=job_id, mode=body.mode, dry_run=body.dry_run, pace=pace, ticks=len(planned),
                      queued=queued, items=chosen)  # fmt: skip
    return respond(out)


ROUTES = (
    Route("POST", f"{JOB}/backfill", backfill_job,
          f"Queue runs for the job's past ticks in [from, to), as its schedule was then (at most {MAX_TICKS} "
          "ticks, CRONOS_BACKFILL_MAX_RUNS runs): by mode, each with its tick's scheduled_for and idempotency key, "
          "the tick's next free attempt, trigger `backfill`, released at `pace` runs a second (at most "
          "CRONOS_BACKFILL_MAX_PER_S); the job's overlap policy and queue apply. `dry_run`: the list only, nothing "
          "written. 409: the job's backfills still releasing runs are at CRONOS_BACKFILL_MAX_ACTIVE_PER_JOB; 429: "
          "the caller's at CRONOS_BACKFILL_MAX_ACTIVE_PER_TOKEN",
          body=BackfillBody, response=BackfillOut,
          errors=(NotFound, Conflict, TooManyRequests, *BODY_ERRORS, *DB_ERRORS)),
)  # fmt: skip
