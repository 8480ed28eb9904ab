"""GET /api/fleet/starts: the fleet's planned starts per minute over the next hours (the console's
Fleet page), so a herd (thousands of jobs at :00) is visible before it hits the executors.

Computed as the herd warning computes it (api.lint): one grouped read of the active jobs, each
distinct (expression, zone) walked once on the compute thread, jobs with jitter at their jittered
instants; bounded (`partial` says the budget ran out) and reused for a few seconds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from aiohttp import web
from msgspec import Meta

from api import lint
from api.bodies import respond
from api.routing import DB_ERRORS, Query, Route
from api.state import BACKENDS
from cronos.errors import InvalidInput
from cronos.fleet_starts import peaks

MAX_HOURS = 48


class Peak(msgspec.Struct, kw_only=True):
    at: datetime
    starts: int


class FleetStarts(msgspec.Struct, kw_only=True):
    start: Annotated[datetime, Meta(description="the first minute counted (UTC)")]
    counts: Annotated[list[int], Meta(description="planned starts in each minute from `start`, one per minute")]
    jobs: Annotated[int, Meta(description="active repeating jobs counted")]
    schedules: Annotated[int, Meta(description="distinct (expression, time zone) pairs walked")]
    partial: Annotated[bool, Meta(description="the computation's budget ran out: some schedules are missing")]
    peaks: Annotated[list[Peak], Meta(description="the busiest minutes, busiest first (at most 5)")]
    herd_jobs: Annotated[int, Meta(description="starts in one minute that make a herd warning (CRONOS_HERD_JOBS)")]
    spread_jobs: Annotated[
        int, Meta(description="active jobs whose cron expression has an `H` or with a `spread` (their name picks it)")
    ]
    unspread_peak: Annotated[
        int,
        Meta(description="with spread jobs: the busiest minute's starts had every `H` been its range's start "
             "and every spread's offset 0: the peak the spread flattens"),
    ]  # fmt: skip


def _hours(raw: str | None) -> int:
    if raw is None:
        return lint.FLEET_HOURS
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 2 and 1 <= int(raw) <= MAX_HOURS):
        raise InvalidInput("hours", f"must be an integer between 1 and {MAX_HOURS}")
    return int(raw)


async def fleet_starts(request: web.Request) -> web.Response:
    hours = _hours(request.query.get("hours"))
    backends = request.app[BACKENDS]
    starts = await lint.fleet_starts(backends, hours)
    return respond(
        FleetStarts(
            start=starts.start,
            counts=starts.counts,
            jobs=starts.jobs,
            schedules=starts.schedules,
            partial=starts.partial,
            peaks=[Peak(at=at, starts=n) for at, n in peaks(starts)],
            herd_jobs=backends.settings.herd_jobs,
            spread_jobs=starts.spread_jobs,
            unspread_peak=starts.unspread_peak,
        )
    )


ROUTES = (
    Route("GET", "/api/fleet/starts", fleet_starts,
          "Planned starts per minute of every active repeating job over the next hours (herds at :00)",
          response=FleetStarts, errors=(InvalidInput, *DB_ERRORS),
          query=(Query("hours", f"how many hours ahead, 1..{MAX_HOURS} (default {lint.FLEET_HOURS})",
                       maximum=MAX_HOURS),)),
)  # fmt: skip
