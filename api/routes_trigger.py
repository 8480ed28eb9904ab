"""POST /api/jobs/{id}/trigger: run a job now, optionally with inputs (issue 24, item 5).

Without a body (or with `{}`) it queues one manual run due now, as it always did. A body may carry
`payload` overrides (a JSON Merge Patch of the job's payload, checked by cronos.inputs against the
job's secrets, then as the job's kind requires) and `scheduled_for`, a past tick to re-run with its
logical date, idempotency key and the tick's next free attempt. Scope write; admin for a shell job
or a job whose chain runs one (as any trigger). Audited with the overrides, secrets redacted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import msgspec
from aiohttp import web
from msgspec import Meta

from api.bodies import check_job_payload, decode, path_id, respond, run_out, utc_now
from api.routes_jobs import JOB, _authorize, _policy
from api.routing import BODY_ERRORS, DB_ERRORS, Route
from api.schemas import RunOut
from api.state import BACKENDS
from cronos import inputs
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.models import Job
from cronos.store import inputs as store_inputs
from cronos.store.ticks import TickStore
from cronos.ticks import segments

_US = timedelta(microseconds=1)
RETENTION_PASSED = "is past the runs' retention (CRONOS_RUNS_RETENTION): the ledger forgot that tick's attempts"


class TriggerBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Inputs of a manual run; both optional (no body, or `{}`: a run now with the job's payload)."""

    payload: (
        Annotated[
            dict[str, Any],
            Meta(
                description="overrides of the job's payload for this run only: a JSON Merge Patch (RFC 7396; "
                "objects merge key by key, other values replace, null removes a key), validated as the job's "
                "kind requires. A place holding a secret (or that would hold one) cannot be set, and while the "
                "job holds secrets its target (URL, method; a task's action) cannot change"
            ),
        ]
        | None
    ) = None
    scheduled_for: (
        Annotated[
            datetime,
            Meta(
                tz=True,
                description="re-run this past tick with its logical date: a tick of the job's schedule as of "
                "that time, or the tick of one of its runs. The run gets this scheduled_for, its idempotency "
                "key `<job_id>:<scheduled_for>` and the tick's next free attempt (409 while a run of the tick "
                "has not ended)",
            ),
        ]
        | None
    ) = None


async def _rerun(request: web.Request, job_id: int, tick: datetime) -> store_inputs.Rerun:
    """The re-run's tick, with why the schedule does not fire at it as of that time (None: it does)."""
    now = utc_now()
    tick = tick.astimezone(UTC)
    if tick > now:
        raise InvalidInput("$.scheduled_for", inputs.IN_FUTURE)
    backends = request.app[BACKENDS]
    retention = backends.settings.runs_retention_s
    if retention and tick < now - timedelta(seconds=retention):
        raise InvalidInput("$.scheduled_for", RETENTION_PASSED)
    history, _cursor = await TickStore(await backends.pool()).history(job_id, tick - _US, tick, 100)
    return store_inputs.Rerun(tick, inputs.tick_refusal(segments(history), tick, now))


async def trigger_job(request: web.Request) -> web.Response:
    return await run_now(request, path_id(request))


async def run_now(request: web.Request, job_id: int) -> web.Response:
    """Queue the run the body asks for, as the request's principal, if it may trigger the job
    (api.shell_authority): this route's and a trigger URL's (api.routes_hooks) one way."""
    principal, guard, _check = await _authorize(request, "trigger", job_id)
    body = await decode(request, TriggerBody) if request.body_exists else TriggerBody()
    backends = request.app[BACKENDS]
    if body.payload is None and body.scheduled_for is None:  # as it always was
        run = await (await backends.jobs()).trigger(job_id, actor=principal.name, guard=guard)
        return respond(run_out(run), status=202)
    rerun = None if body.scheduled_for is None else await _rerun(request, job_id, body.scheduled_for)
    policy = _policy(request, principal)
    overrides = body.payload

    def check(job: Job) -> dict[str, Any] | None:
        if overrides is None:
            return None
        merged = inputs.check_overrides(job.kind, job.payload, overrides)
        check_job_payload(job.kind, merged, policy)
        return inputs.as_applied(overrides, merged)

    pool = await backends.pool()
    run, shown = await store_inputs.trigger(pool, job_id, check, rerun, actor=principal.name, guard=guard)
    return respond(msgspec.structs.replace(run_out(run), inputs=shown), status=202)


ROUTES = (
    Route("POST", f"{JOB}/trigger", trigger_job,
          "Queue one run now (even when paused); optionally with payload overrides and/or a past tick's "
          "logical date (`scheduled_for`). No body: the job's payload, a new tick now", status=202,
          body=TriggerBody, body_required=False, response=RunOut,
          errors=(NotFound, Conflict, *BODY_ERRORS, *DB_ERRORS)),
)  # fmt: skip
