"""/api/jobs: register, list, read, change, delete, pause/resume/toggle and trigger jobs."""

from __future__ import annotations

import msgspec
from aiohttp import web

from api.bodies import (
    JobPolicy,
    check_job,
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
from api.routing import BODY_ERRORS, DB_ERRORS, ID, PAGE, Errors, Query, Route
from api.schemas import JobCreate, JobList, JobOut, JobPatch, RunOut
from api.state import BACKENDS
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.models import JOB_STATUSES


def _policy(request: web.Request) -> JobPolicy:
    settings = request.app[BACKENDS].settings  # AUTH: allow_shell also needs the caller's admin scope
    return JobPolicy(settings.http_allow_nets, settings.allow_shell, settings.job_payload_max_bytes)


async def create_job(request: web.Request) -> web.Response:
    body = await decode(request, JobCreate)
    fields = msgspec.structs.asdict(body)
    check_job(fields, _policy(request))
    job = await (await request.app[BACKENDS].jobs()).create(fields)
    return respond(job_out(job, utc_now()), status=201)


async def list_jobs(request: web.Request) -> web.Response:
    status = query_choice(request, "status", JOB_STATUSES)
    limit = query_limit(request)
    after = decode_cursor(request.query.get("cursor")) or 0
    jobs = await (await request.app[BACKENDS].jobs()).list_jobs(status, after, limit)
    now = utc_now()
    cursor = encode_cursor(jobs[-1].id) if len(jobs) == limit else None
    return respond(JobList(items=[job_out(j, now) for j in jobs], next_cursor=cursor))


async def get_job(request: web.Request) -> web.Response:
    store = await request.app[BACKENDS].jobs()
    job = await store.get(path_id(request))
    last = await store.last_run(job.id)
    return respond(job_out(job, utc_now(), last_run=None if last is None else run_out(last)))


async def patch_job(request: web.Request) -> web.Response:
    job_id = path_id(request)
    patch = await decode(request, JobPatch)
    policy = _policy(request)
    job = await (await request.app[BACKENDS].jobs()).update(
        job_id, patch.changes(), lambda merged: check_job(merged, policy)
    )
    return respond(job_out(job, utc_now()))


async def delete_job(request: web.Request) -> web.Response:
    await (await request.app[BACKENDS].jobs()).delete(path_id(request))
    return web.Response(status=204)


async def _set_status(request: web.Request, status: str | None) -> web.Response:
    job = await (await request.app[BACKENDS].jobs()).set_status(path_id(request), status)
    return respond(job_out(job, utc_now()))


async def toggle_job(request: web.Request) -> web.Response:
    return await _set_status(request, None)


async def pause_job(request: web.Request) -> web.Response:
    return await _set_status(request, "paused")


async def resume_job(request: web.Request) -> web.Response:
    return await _set_status(request, "active")


async def trigger_job(request: web.Request) -> web.Response:
    run = await (await request.app[BACKENDS].jobs()).trigger(path_id(request))
    return respond(run_out(run), status=202)


JOB = f"/api/jobs/{ID}"
_GONE: Errors = (NotFound, *DB_ERRORS)
_WRITE: Errors = (*BODY_ERRORS, Conflict, *DB_ERRORS)
ROUTES = (
    Route("POST", "/api/jobs", create_job, "Register a job", status=201, body=JobCreate, response=JobOut,
          errors=_WRITE),
    Route("GET", "/api/jobs", list_jobs, "List jobs by id", response=JobList, errors=(InvalidInput, *DB_ERRORS),
          query=(Query("status", "only jobs in this status", enum=JOB_STATUSES), *PAGE)),
    Route("GET", JOB, get_job, "A job, its next run time and its last run", response=JobOut, errors=_GONE),
    Route("PATCH", JOB, patch_job, "Change some fields (validated like a create; nothing changes on error)",
          body=JobPatch, response=JobOut, errors=(NotFound, *_WRITE)),
    Route("DELETE", JOB, delete_job, "Delete a job and its runs", status=204, errors=_GONE),
    Route("PATCH", f"{JOB}/toggle", toggle_job, "Pause an active job, resume a paused one", response=JobOut,
          errors=_GONE),
    Route("POST", f"{JOB}/pause", pause_job, "Pause a job", response=JobOut, errors=_GONE),
    Route("POST", f"{JOB}/resume", resume_job, "Resume a job; ticks due while paused are not caught up",
          response=JobOut, errors=_GONE),
    Route("POST", f"{JOB}/trigger", trigger_job, "Queue one run now (even when paused)", status=202,
          response=RunOut, errors=_GONE),
)  # fmt: skip
