"""A job's health (issue 24): GET /api/jobs/{id}/health, and the verdicts of a page of jobs.

The verdict is the leader's health evaluator's (dispatcher/health.py, decided in cronos.health): a
job it has no row for had no failure and no expectation judged yet, and is shown `ok` once a run
of it completed (`unknown` before).
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Annotated

import msgspec
from aiohttp import web

from api.bodies import MAX_ID, path_id, respond
from api.routing import DB_ERRORS, ID, Query, Route
from api.state import BACKENDS
from cronos import health
from cronos.errors import InvalidInput, NotFound
from cronos.store.health import HealthStore, JobHealthView

MAX_IDS = 500

_VERDICT = msgspec.Meta(
    description="ok; late (a run waits past start_within_s); failing (the last run(s) failed, no retry left); "
    "overrunning (a run still runs past finish_within_s or its timeout); missing (a tick had no run, or no "
    "success within success_every_s); unknown (no run finished yet)"
)


class JobHealth(msgspec.Struct, kw_only=True):
    job_id: int
    verdict: Annotated[health.Verdict, _VERDICT]
    reason: Annotated[str | None, msgspec.Meta(description="why, in a sentence")]
    consecutive_failures: Annotated[int, msgspec.Meta(description="runs failed in a row, with no retry left")]
    last_success_at: datetime | None
    last_failure_at: datetime | None
    missed_at: Annotated[datetime | None, msgspec.Meta(description="the newest tick found with no run nor skip")]
    updated_at: Annotated[datetime | None, msgspec.Meta(description="when the leader last judged it; null: never")]


class JobHealthList(msgspec.Struct, kw_only=True):
    """The health of the jobs asked for that exist, by id."""

    items: list[JobHealth]


def _shown(view: JobHealthView) -> JobHealth:
    """A job's health as both routes show it: the leader's row, or (none yet) what its runs say."""
    if view.row is None:
        return _out(health.unrecorded(view.job_id, view.newest_success), None)
    row = view.row
    if view.newest_success is not None and (row.last_success_at is None or view.newest_success > row.last_success_at):
        row = replace(row, last_success_at=view.newest_success)  # a success since the leader's last pass
    return _out(row, view.updated_at)


def _out(row: health.Health, updated_at: datetime | None) -> JobHealth:
    return JobHealth(
        job_id=row.job_id, verdict=row.verdict, reason=row.reason, consecutive_failures=row.consecutive_failures,
        last_success_at=row.last_success_at, last_failure_at=row.last_failure_at, missed_at=row.missed_at,
        updated_at=updated_at,
    )  # fmt: skip


async def job_health(request: web.Request) -> web.Response:
    job_id = path_id(request)
    views = await HealthStore(await request.app[BACKENDS].pool()).of_jobs([job_id])
    if not views:
        raise NotFound(f"job {job_id} not found")
    return respond(_shown(views[0]))


IDS_PATTERN = f"^[0-9]{{1,19}}(,[0-9]{{1,19}}){{0,{MAX_IDS - 1}}}$"


def _ids(raw: str | None) -> list[int]:
    """`1,2,3`: at most MAX_IDS ids; one past a bigint names no job (left out, as a path id is a 404)."""
    if raw is None or re.fullmatch(IDS_PATTERN, raw) is None:
        raise InvalidInput("ids", f"name 1 to {MAX_IDS} job ids, comma-separated (`1,2,3`)")
    return [n for n in map(int, raw.split(",")) if n <= MAX_ID]


async def jobs_health(request: web.Request) -> web.Response:
    ids = _ids(request.query.get("ids"))
    views = await HealthStore(await request.app[BACKENDS].pool()).of_jobs(ids)
    return respond(JobHealthList(items=[_shown(view) for view in views]))


ROUTES = (
    Route("GET", f"/api/jobs/{ID}/health", job_health,
          "The job's health as the leader judges it: a verdict (ok, late, failing, overrunning, missing, unknown) "
          "with its reason, the failures in a row and the newest success and failure (docs/expectations.md)",
          response=JobHealth, errors=(NotFound, *DB_ERRORS)),
    Route("GET", "/api/jobs/health", jobs_health,
          "The health of the jobs named, as GET /api/jobs/{id}/health shows each (the console's badges); "
          "an id that names no job is left out",
          response=JobHealthList, errors=(InvalidInput, *DB_ERRORS),
          query=(Query("ids", f"job ids, comma-separated (at most {MAX_IDS})", required=True,
                       schema={"type": "string", "pattern": IDS_PATTERN}),)),
)  # fmt: skip
