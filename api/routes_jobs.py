"""/api/jobs: register, list, read, change, delete, pause/resume/toggle, trigger jobs, their history
and revisions (a page of either bounded in bytes, one revision whole).

Reads need scope read; writes scope write, and admin where api.shell_authority says (a job that
is or becomes shell, checked under the job's row lock; a change, resume or toggle of a job whose
chain runs a shell job). Each write is audited as its caller.
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from api.auth import Principal, principal_of
from api.bodies import (
    PAGE_PAYLOAD_BYTES,
    JobPolicy,
    check_job,
    created_past_window,
    decode,
    decode_cursor,
    encode_cursor,
    job_out,
    path_id,
    query_choice,
    query_limit,
    respond,
    run_out,
    utc_now,
)
from api.job_lint import job_extras
from api.names import job_name
from api.namespace_query import NAMESPACE, query_namespace
from api.routes_tokens import audit_page
from api.routing import BODY_ERRORS, DB_ERRORS, ID, PAGE, Errors, Query, Route
from api.schemas import JobCreate, JobList, JobOut, JobPatch, RevisionList
from api.schemas_rules import PauseBody
from api.schemas_tokens import AuditList
from api.selectors import SELECTOR, query_selector
from api.shell_authority import Action, check_chain, guard_for
from api.state import BACKENDS
from cronos import breaker
from cronos.errors import BackendUnavailable, Conflict, InvalidInput, NotFound
from cronos.models import JOB_STATUSES
from cronos.store.audit import AuditStore
from cronos.store.db import PageBounds
from cronos.store.jobs import Check, Guard
from cronos.store.queues import QueueStore
from cronos.store.revisions import MAX_NUMBER, Revision, RevisionStore
from cronos.stream import RunStream


def _policy(request: web.Request, principal: Principal) -> JobPolicy:
    """What this caller may make a job be: shell only where the cluster allows it, for an admin."""
    settings = request.app[BACKENDS].settings
    return JobPolicy(
        allow_nets=settings.http_allow_nets,
        allow_shell=settings.allow_shell and principal.admin,
        payload_max_bytes=settings.job_payload_max_bytes,
    )


def _checker(request: web.Request, action: Action, job_id: int | None = None) -> tuple[Principal, Guard, Check]:
    """The caller, the guard of a stored job's kind for `action`, and the check of a job as it would become."""
    principal = principal_of(request)
    guard = guard_for(principal, action, job_id)
    policy = _policy(request, principal)

    def check(fields: dict[str, Any]) -> None:
        guard(fields["kind"])  # a job that becomes shell needs admin: 403 before the 422s
        check_job(fields, policy)

    return principal, guard, check


async def _authorize(request: web.Request, action: Action, job_id: int) -> tuple[Principal, Guard, Check]:
    """_checker, once api.shell_authority allowed `action` on the job's chain (403 otherwise)."""
    principal, guard, check = _checker(request, action, job_id)
    await check_chain(await request.app[BACKENDS].pool(), principal, action, job_id)
    return principal, guard, check


async def _check_queue_cap(request: web.Request, queue: str, job_id: int | None) -> None:
    """A job that would name one queue more than CRONOS_MAX_QUEUES: 422 on $.queue (issue 22). The
    queues with a stream count too (an orphaned one until the leader drops it); with Redis away,
    those jobs name."""
    backends = request.app[BACKENDS]
    try:
        listed = await backends.redis_call(RunStream(backends.redis, backends.keys).known_queues())
    except BackendUnavailable:
        listed = []
    await QueueStore(await backends.pool()).check_cap(queue, job_id, backends.settings.max_queues, listed)


def _dry_run(request: web.Request) -> bool:
    return query_choice(request, "dry_run", ("true", "false")) == "true"


async def create_job(request: web.Request) -> web.Response:
    dry_run = _dry_run(request)
    body = await decode(request, JobCreate)
    fields = msgspec.structs.asdict(body)
    fields["name"] = job_name(fields["name"])
    fields["namespace"] = query_namespace(request)
    principal, _guard, check = _checker(request, "create")
    check(fields)
    await _check_queue_cap(request, fields["queue"], None)
    if fields["status"] == "active" and created_past_window(fields, utc_now()):
        fields["status"] = "expired"  # nothing left to run: it ends at once, and says so
    job, secret = await (await request.app[BACKENDS].jobs()).create(fields, actor=principal.name, dry_run=dry_run)
    # The signing secret of an http job's requests, shown this once (and on rotation).
    extra = {"webhook_secret": secret} if job.kind == "http" and not dry_run else {}
    extra |= await job_extras(request.app[BACKENDS], job)  # warnings
    return respond(job_out(job, utc_now(), **extra), status=200 if dry_run else 201)


async def list_jobs(request: web.Request) -> web.Response:
    status = query_choice(request, "status", JOB_STATUSES)
    limit = query_limit(request)
    after = decode_cursor(request.query.get("cursor")) or 0
    selector = query_selector(request)
    store = await request.app[BACKENDS].jobs()
    jobs, more = await store.list_jobs(status, after, limit, PAGE_PAYLOAD_BYTES, selector, query_namespace(request))
    now = utc_now()
    cursor = encode_cursor(jobs[-1].id) if more else None
    return respond(JobList(items=[job_out(j, now) for j in jobs], next_cursor=cursor))


async def get_job(request: web.Request) -> web.Response:
    store = await request.app[BACKENDS].jobs()
    job = await store.get(path_id(request))
    last = await store.last_run(job.id)
    settings = request.app[BACKENDS].settings  # the breaker that applies: its own, its queue's, the cluster's
    effective = breaker.effective(job.expectations, job.queue, settings.breaker_default_failures,
                                  settings.breaker_defaults)  # fmt: skip
    return respond(job_out(job, utc_now(), last_run=None if last is None else run_out(last), breaker=effective))


async def patch_job(request: web.Request) -> web.Response:
    job_id = path_id(request)
    dry_run = _dry_run(request)
    patch = await decode(request, JobPatch)
    changes = patch.changes()
    if "name" in changes:
        changes["name"] = job_name(changes["name"])
    principal, guard, check = await _authorize(request, "change", job_id)
    if "queue" in changes:
        await _check_queue_cap(request, changes["queue"], job_id)
    store = await request.app[BACKENDS].jobs()
    # For the diff: the schedule before a change of it (the name picks an `H`'s values, cronos.hashed).
    timed = {"cron_expression", "timezone", "name", "schedules", "spread"}
    before = await store.get(job_id) if timed & changes.keys() else None
    job = await store.update(job_id, changes, check, actor=principal.name, guard=guard, dry_run=dry_run)
    return respond(job_out(job, utc_now(), **await job_extras(request.app[BACKENDS], job, before)))


async def delete_job(request: web.Request) -> web.Response:
    job_id = path_id(request)
    dry_run = _dry_run(request)
    principal, guard, _check = _checker(request, "delete", job_id)
    await (await request.app[BACKENDS].jobs()).delete(job_id, actor=principal.name, guard=guard, dry_run=dry_run)
    return web.Response(status=204)


async def _set_status(
    request: web.Request, action: Action, status: str | None, pause: PauseBody | None = None
) -> web.Response:
    job_id = path_id(request)
    dry_run = _dry_run(request)
    principal, guard, _check = await _authorize(request, action, job_id)
    store = await request.app[BACKENDS].jobs()
    until, note = (None, None) if pause is None else (pause.until, pause.note)
    job = await store.set_status(
        job_id, status, actor=principal.name, guard=guard, until=until, note=note, dry_run=dry_run
    )
    return respond(job_out(job, utc_now()))


async def toggle_job(request: web.Request) -> web.Response:
    return await _set_status(request, "toggle", None)


async def pause_job(request: web.Request) -> web.Response:
    """Pause; with a body `{until, note}` the leader resumes the job at `until` (issue 25)."""
    body = await decode(request, PauseBody) if request.body_exists else None
    if body is not None and body.until is not None and body.until <= utc_now():
        raise InvalidInput("$.until", "must be in the future")
    return await _set_status(request, "pause", "paused", body)


async def resume_job(request: web.Request) -> web.Response:
    return await _set_status(request, "resume", "active")


async def rotate_secret(request: web.Request) -> web.Response:
    job_id = path_id(request)
    principal, guard, _check = _checker(request, "rotate-secret", job_id)
    store = await request.app[BACKENDS].jobs()
    job, secret = await store.rotate_secret(job_id, actor=principal.name, guard=guard)
    return respond(job_out(job, utc_now(), webhook_secret=secret))


def _page_bounds(request: web.Request) -> PageBounds:
    settings = request.app[BACKENDS].settings
    return PageBounds(settings.history_page_max_bytes, settings.history_value_max_bytes)


async def job_history(request: web.Request) -> web.Response:
    limit = query_limit(request)
    before = decode_cursor(request.query.get("cursor"))
    store = AuditStore(await request.app[BACKENDS].pool())
    entries, cut = await store.job_history(path_id(request), before, limit, _page_bounds(request))
    return respond(audit_page(entries, limit, cut=cut))


async def job_revisions(request: web.Request) -> web.Response:
    limit = query_limit(request)
    before = decode_cursor(request.query.get("cursor"))
    store = RevisionStore(await request.app[BACKENDS].pool())
    before = None if before is None else min(before, MAX_NUMBER)
    found, cut = await store.of_job(path_id(request), before, limit, _page_bounds(request))
    cursor = encode_cursor(found[-1].number) if found and (cut or len(found) == limit) else None
    return respond(RevisionList(items=found, next_cursor=cursor))


async def job_revision(request: web.Request) -> web.Response:
    number = path_id(request, "number")
    if number > MAX_NUMBER:
        raise NotFound(f"no such resource: {request.path[:100]}")
    return respond(await RevisionStore(await request.app[BACKENDS].pool()).one(path_id(request), number))


JOB = f"/api/jobs/{ID}"
_GONE: Errors = (NotFound, *DB_ERRORS)
_WRITE: Errors = (*BODY_ERRORS, Conflict, *DB_ERRORS)
_STATUS: Errors = (NotFound, Conflict, *DB_ERRORS)  # 409: the job ended (completed, expired)
# Every check of the write (a create or change: the write too, rolled back): a client (cronos apply --dry-run) learns
# each refusal the write would make without restating the checks.
_DRY_RUN = Query("dry_run", "true: every check of this write, nothing written", enum=("true", "false"))
ROUTES = (
    Route("POST", "/api/jobs", create_job, "Register a job", status=201, body=JobCreate, response=JobOut,
          errors=(NotFound, *_WRITE), query=(NAMESPACE, _DRY_RUN),
          also=((200, "dry_run=true: every check passed, nothing written (the job as it would be)", JobOut),)),
    Route("GET", "/api/jobs", list_jobs, "List jobs by id", response=JobList, errors=(InvalidInput, *DB_ERRORS),
          query=(NAMESPACE, Query("status", "only jobs in this status", enum=JOB_STATUSES), SELECTOR, *PAGE)),
    Route("GET", JOB, get_job, "A job, its next run time and its last run", response=JobOut, errors=_GONE),
    Route("PATCH", JOB, patch_job, "Change some fields (validated like a create; nothing changes on error)",
          body=JobPatch, response=JobOut, errors=(NotFound, *_WRITE), query=(_DRY_RUN,)),
    Route("DELETE", JOB, delete_job, "Delete a job and its runs (409 while other jobs name it in `parents`)",
          status=204, errors=(Conflict, *_GONE), query=(_DRY_RUN,)),
    Route("PATCH", f"{JOB}/toggle", toggle_job, "Pause an active job, resume a paused one (409: it ended)",
          response=JobOut, errors=_STATUS, query=(_DRY_RUN,)),
    Route("POST", f"{JOB}/pause", pause_job,
          "Pause a job; with `until`, the leader resumes it then (a timed pause, with an optional note)",
          body=PauseBody, body_required=False, response=JobOut, errors=(*BODY_ERRORS, *_STATUS), query=(_DRY_RUN,)),
    Route("POST", f"{JOB}/resume", resume_job, "Resume a job; ticks due while paused are not caught up",
          response=JobOut, errors=_STATUS, query=(_DRY_RUN,)),
    # POST {JOB}/trigger: api.routes_trigger (run now, with inputs)
    Route("POST", f"{JOB}/rotate-secret", rotate_secret,
          "Draw a new webhook signing secret (in this response only); the old one stops signing at once",
          response=JobOut, errors=_GONE),
    Route("GET", f"{JOB}/history", job_history,
          "Who changed this job, when, and its fields before and after (newest first; kept after a delete)",
          response=AuditList, errors=(NotFound, InvalidInput, *DB_ERRORS), query=PAGE),
    Route("GET", f"{JOB}/revisions", job_revisions,
          "Every change to what or when the job runs, pause, resume and delete included, numbered from 1 "
          "(newest first; kept after a delete)",
          response=RevisionList, errors=(NotFound, InvalidInput, *DB_ERRORS), query=PAGE),
    Route("GET", f"{JOB}/revisions/{{number:[0-9]+}}", job_revision,
          "One revision whole: the list views show a value past CRONOS_HISTORY_VALUE_MAX_BYTES as "
          "`{truncated, bytes, hash}`", response=Revision, errors=_GONE),
)  # fmt: skip
