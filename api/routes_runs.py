"""Runs: a job's runs newest first, and one run with its traceback and result."""

from __future__ import annotations

import contextlib

import msgspec
from aiohttp import web

from api.bodies import decode_run_cursor, encode_run_cursor, path_id, query_choice, query_limit, respond, run_out
from api.routing import DB_ERRORS, ID, PAGE, Query, Route
from api.schemas import RunList, RunOut
from api.state import BACKENDS
from api.task_routing import unserved
from cronos.errors import InvalidInput, NotFound
from cronos.models import RUN_STATES
from cronos.store import run_usage
from cronos.store.inputs import shown_overrides


async def list_runs(request: web.Request) -> web.Response:
    state = query_choice(request, "state", RUN_STATES)
    limit = query_limit(request)
    before = decode_run_cursor(request.query.get("cursor"))
    runs = await (await request.app[BACKENDS].jobs()).runs(path_id(request), state, before, limit)
    cursor = encode_run_cursor(runs[-1].scheduled_for, runs[-1].id) if len(runs) == limit else None
    return respond(RunList(items=[run_out(r) for r in runs], next_cursor=cursor))


async def get_run(request: web.Request) -> web.Response:
    run = await (await request.app[BACKENDS].jobs()).run(path_id(request))
    backends = request.app[BACKENDS]
    pool = await backends.pool()
    shown = await shown_overrides(pool, run)  # what it ran with (redacted)
    usage = await run_usage.of_run(pool, run.id, run.scheduled_for)
    out = msgspec.structs.replace(run_out(run, detail=True), inputs=shown, usage=usage)
    if run.state == "queued":  # why it waits, when no live executor can run it
        with contextlib.suppress(NotFound):  # its job deleted meanwhile: nothing to say
            out.unserved = await unserved(backends, await (await backends.jobs()).get(run.job_id))
    return respond(out)


ROUTES = (
    Route("GET", f"/api/jobs/{ID}/runs", list_runs, "A job's runs, newest first", response=RunList,
          errors=(NotFound, InvalidInput, *DB_ERRORS),
          query=(Query("state", "only runs in this state", enum=RUN_STATES), *PAGE)),
    Route("GET", f"/api/runs/{ID}", get_run, "One run, with its traceback and result excerpt", response=RunOut,
          errors=(NotFound, *DB_ERRORS)),
)  # fmt: skip
