"""All runs, one view (GET /api/runs), and "retry this run" (POST /api/runs/{id}/retry).

The view reads scope read; a retry needs scope write, and admin for a shell job or a job whose
chain runs one (as a trigger does). A retry is audited as its caller in the job's history.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import get_args
from zoneinfo import ZoneInfo

from aiohttp import web

from api.auth import principal_of
from api.bodies import MAX_ID, check_instant, decode_cursor, encode_cursor, path_id, query_limit, respond, run_out
from api.namespace_query import NAMESPACE, query_namespace
from api.routes_schedule import query_time
from api.routing import DB_ERRORS, ID, PAGE, Query, Route
from api.schemas import RunList, RunOut
from api.shell_authority import check_chain, guard_for
from api.state import BACKENDS
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.models import QUEUE_PATTERN, RUN_STATES, Trigger
from cronos.store.reruns import retry_run
from cronos.store.run_views import SCAN, RunFilter, runs_page

TRIGGERS: tuple[str, ...] = get_args(Trigger)
_UTC = ZoneInfo("UTC")  # a time without an offset is read in UTC


def _states(request: web.Request) -> tuple[str, ...]:
    """`state`, repeated or comma-separated; each one of RUN_STATES."""
    states: list[str] = []
    for raw in request.query.getall("state", []):
        for name in raw.split(","):
            if name not in RUN_STATES:
                raise InvalidInput("state", f"must be one of {', '.join(RUN_STATES)} (repeat it for several)")
            states.append(name)
    return tuple(dict.fromkeys(states))


def _job(raw: str | None) -> int | None:
    if raw is None:
        return None
    digits = raw.lstrip("0")
    if not (raw.isascii() and raw.isdigit()) or not digits or len(digits) > 19 or int(digits) > MAX_ID:
        raise InvalidInput("job", "must be a job id (a positive integer)")
    return int(digits)


def _queue(raw: str | None) -> str | None:
    if raw is not None and not re.fullmatch(QUEUE_PATTERN, raw):
        raise InvalidInput("queue", "must be a queue name (letters, digits, '-', '_'; 64 at most)")
    return raw


def _trigger(raw: str | None) -> str | None:
    if raw is not None and raw not in TRIGGERS:
        raise InvalidInput("trigger", f"must be one of {', '.join(TRIGGERS)}")
    return raw


def time_range(raw_from: str | None, raw_to: str | None) -> tuple[datetime | None, datetime | None]:
    """`from` and `to` (RFC 3339; without an offset, UTC), `to` after `from`: 422 naming the one refused."""
    since = None if raw_from is None else check_instant(query_time(raw_from, _UTC, "from"), "from")
    until = None if raw_to is None else check_instant(query_time(raw_to, _UTC, "to"), "to")
    if since is not None and until is not None and since >= until:
        raise InvalidInput("to", "must be after `from`")
    return since, until


def run_filter(request: web.Request) -> RunFilter:
    """The query's filters, each refused with a 422 naming it."""
    since, until = time_range(request.query.get("from"), request.query.get("to"))
    return RunFilter(
        states=_states(request),
        job_id=_job(request.query.get("job")),
        queue=_queue(request.query.get("queue")),
        trigger=_trigger(request.query.get("trigger")),
        since=since,
        until=until,
        namespace=query_namespace(request),
    )


async def list_all_runs(request: web.Request) -> web.Response:
    wanted = run_filter(request)
    limit = query_limit(request)
    before = decode_cursor(request.query.get("cursor"))
    page = await runs_page(await request.app[BACKENDS].pool(), wanted, before, limit)
    cursor = None if page.next_before is None else encode_cursor(page.next_before)
    return respond(RunList(items=[run_out(r) for r in page.runs], next_cursor=cursor))


async def retry(request: web.Request) -> web.Response:
    principal = principal_of(request)
    run_id = path_id(request)
    backends = request.app[BACKENDS]
    job_id = (await (await backends.jobs()).run(run_id)).job_id
    await check_chain(await backends.pool(), principal, "retry", job_id)  # it runs the job, then its chain
    guard = guard_for(principal, "retry", job_id)
    run = await retry_run(await backends.pool(), run_id, actor=principal.name, guard=guard)
    return respond(run_out(run), status=202)


_QUERY = (
    Query(
        "state",
        "only runs in these states (repeat the parameter, or separate them with commas)",
        schema={"type": "array", "items": {"type": "string", "enum": list(RUN_STATES)}},
    ),
    Query("job", "only this job's runs (its id)", schema={"type": "integer", "minimum": 1, "maximum": MAX_ID}),
    Query("queue", "only runs of jobs in this queue", schema={"type": "string", "pattern": QUEUE_PATTERN}),
    Query("trigger", "only runs with this trigger", enum=TRIGGERS),
    Query(
        "from",
        "only runs whose tick (scheduled_for) is at or after this RFC 3339 time; without an offset, UTC",
        schema={"type": "string", "format": "date-time"},
    ),
    Query(
        "to",
        "only runs whose tick is before this time (after `from`)",
        schema={"type": "string", "format": "date-time"},
    ),
    *PAGE,
)
ROUTES = (
    Route("GET", "/api/runs", list_all_runs,
          "Every job's runs, newest first (the order they were queued), filtered; a page reads at most "
          f"{SCAN} runs, so a rare match may give a short page with a `next_cursor` to go on from",
          response=RunList, errors=(InvalidInput, *DB_ERRORS), query=(NAMESPACE, *_QUERY)),
    Route("POST", f"/api/runs/{ID}/retry", retry,
          "Retry this run: queue the next attempt of its tick (same scheduled_for and idempotency key), due "
          "now; 409 unless it ended failed, skipped or cancelled and no attempt of its tick is unfinished",
          status=202, response=RunOut, errors=(NotFound, Conflict, *DB_ERRORS)),
)  # fmt: skip
