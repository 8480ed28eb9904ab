"""GET /api/jobs/overview: what the console's jobs page shows, one call per page.

Per job: its schedule in words, zone, next fire time, last run's state and start delay (from
its tick, with the held-back and waited parts beside it: cronos.delays), success rate over its
last finished runs. No payload (the page does not show it, and it
may be large). Paged by id like GET /api/jobs, so a page costs the same with 10,000 jobs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from aiohttp import web

from api.bodies import decode_cursor, encode_cursor, query_choice, query_limit, respond, utc_now
from api.describe import describe
from api.namespace_query import NAMESPACE, query_namespace
from api.routes_schedule import entry_words
from api.routing import DB_ERRORS, PAGE, Query, Route
from api.schemas import HELD_BACK_MS, START_DELAY_MS, WAITED_MS
from api.selectors import SELECTOR, query_selector
from api.state import BACKENDS
from cronos import delays
from cronos.errors import InvalidInput, InvalidSchedule
from cronos.models import JOB_STATUSES, JobKind, JobStatus, RunState
from cronos.schedule import upcoming
from cronos.schedule_window import NextAfter, job_schedule
from cronos.store.overview import RATE_OVER, JobRow, OverviewStore

MAX_SEARCH = 200  # a job name's own bound


class LastRun(msgspec.Struct, kw_only=True):
    id: int
    state: RunState
    scheduled_for: datetime
    started_at: datetime | None
    start_delay_ms: Annotated[float | None, START_DELAY_MS]
    held_back_ms: Annotated[float | None, HELD_BACK_MS]
    waited_ms: Annotated[float | None, WAITED_MS]
    duration_ms: float | None


class JobOverview(msgspec.Struct, kw_only=True):
    id: int
    name: str
    cron_expression: str | None  # None: a one-off (run_at, on the job's page) or an interval
    description: str
    timezone: str
    kind: JobKind
    status: JobStatus
    next_run_at: datetime | None  # null while paused
    last_run: LastRun | None  # the newest run that started or ended (not one still queued)
    success_rate: float | None  # completed / finished over the last `finished` runs; null before any
    finished: int
    every: str | None = None  # an interval (`every 1h30m` in the description)


class JobOverviewList(msgspec.Struct, kw_only=True):
    items: list[JobOverview]
    next_cursor: str | None


def _describe(row: JobRow) -> str:
    if row.every is not None:
        own = f"every {row.every}"
    else:
        own = "once" if row.cron_expression is None else describe(row.cron_expression)
    said = "; and ".join([own, *(entry_words(entry, row.timezone) for entry in row.schedules)])
    return said if row.spread is None else f"{said}, spread over {row.spread}"


def overview(row: JobRow, now: datetime) -> JobOverview:
    try:  # a stored row keeps its pre-issue-12 meaning until edited (cronos.schedule_legacy)
        schedule: NextAfter | None = None
        if row.every is not None or row.cron_expression is not None:
            schedule = job_schedule(row.cron_expression, row.timezone, every=row.every, anchor=row.anchor,
                                    key=row.name, schedules=row.schedules, spread=row.spread)[0]  # fmt: skip
    except InvalidSchedule:
        schedule = None  # neither meaning accepts the row: nothing fires (the job page says why)
    last = None
    if row.run_id is not None and row.run_state is not None and row.run_scheduled_for is not None:
        tick, due, started = row.run_scheduled_for, row.run_due_at, row.run_started_at
        last = LastRun(
            id=row.run_id,
            state=row.run_state,
            scheduled_for=tick,
            started_at=started,
            start_delay_ms=delays.ms(delays.start_delay_s(tick, started)),
            held_back_ms=None if due is None else delays.ms(delays.held_back_s(tick, due)),
            waited_ms=None if due is None else delays.ms(delays.waited_s(due, started)),
            duration_ms=row.run_duration_ms,
        )
    return JobOverview(
        id=row.id,
        name=row.name,
        cron_expression=row.cron_expression,
        every=row.every,
        description=_describe(row),
        timezone=row.timezone,
        kind=row.kind,
        status=row.status,
        next_run_at=upcoming(schedule.next_after, now) if row.status == "active" and schedule is not None else None,
        last_run=last,
        success_rate=round(row.completed / row.finished, 4) if row.finished else None,
        finished=row.finished,
    )


async def jobs_overview(request: web.Request) -> web.Response:
    status = query_choice(request, "status", JOB_STATUSES)
    search = request.query.get("q")
    if search is not None and (len(search) > MAX_SEARCH or "\x00" in search):
        raise InvalidInput("q", f"at most {MAX_SEARCH} characters, without NUL")
    limit = query_limit(request)
    after = decode_cursor(request.query.get("cursor")) or 0
    selector = query_selector(request)
    store = OverviewStore(await request.app[BACKENDS].pool())
    rows = await store.jobs(status, search, after, limit, selector, query_namespace(request))
    now = utc_now()
    cursor = encode_cursor(rows[-1].id) if len(rows) == limit else None
    return respond(JobOverviewList(items=[overview(row, now) for row in rows], next_cursor=cursor))


ROUTES = (
    Route("GET", "/api/jobs/overview", jobs_overview,
          f"Jobs by id with their schedule in words, next fire time, last run and success rate over their last "
          f"{RATE_OVER} finished runs (the console's jobs page)", response=JobOverviewList,
          errors=(InvalidInput, *DB_ERRORS),
          query=(NAMESPACE, Query("status", "only jobs in this status", enum=JOB_STATUSES),
                 Query("q", "only jobs whose name contains this text (any case)",
                       schema={"type": "string", "maxLength": MAX_SEARCH}), SELECTOR, *PAGE)),
)  # fmt: skip
