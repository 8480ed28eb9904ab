"""The API's side of schedule lint: the fleet's planned starts (cached, computed off the event loop),
and a schedule's warnings with the herd among them.

Used by the preview (api.routes_schedule), the job answers (api.routes_jobs) and the fleet page
(api.routes_fleet). The fleet's starts are read with one grouped statement and walked per distinct
schedule (cronos.fleet_starts); a result is reused for FLEET_TTL_S so a preview per keystroke or a
burst of job writes costs one computation.
"""

from __future__ import annotations

import time
import weakref
from datetime import UTC, datetime, timedelta

from api.backends import Backends
from api.compute import off_loop
from cronos.errors import BackendUnavailable, InvalidSchedule
from cronos.fleet_starts import MINUTE, Starts, starts_per_minute
from cronos.hashed import hashed
from cronos.schedule import Schedule, parse_schedule
from cronos.schedule_lint import LintWarning, hash_note, herd_warning, lint
from cronos.store.fleet import FleetStore

FLEET_HOURS = 24  # the herd warning looks this far ahead
FLEET_TTL_S = 30.0
_CACHE: weakref.WeakKeyDictionary[Backends, dict[int, tuple[float, Starts]]] = weakref.WeakKeyDictionary()


async def fleet_starts(backends: Backends, hours: int = FLEET_HOURS, now: datetime | None = None) -> Starts:
    """Planned starts per minute over the next `hours` (reused for FLEET_TTL_S per API process)."""
    cached = _CACHE.setdefault(backends, {})
    hit = cached.get(hours)
    if hit is not None and time.monotonic() - hit[0] < FLEET_TTL_S and now is None:
        return hit[1]
    groups = await FleetStore(await backends.pool()).groups()
    starts = await off_loop(starts_per_minute, groups, now or datetime.now(UTC), hours * 60)
    if now is None:
        cached[hours] = (time.monotonic(), starts)
    return starts


async def fleet_starts_or_none(backends: Backends) -> Starts | None:
    """The fleet's starts for a warning: None while PostgreSQL is down (a preview still answers,
    without the herd warning)."""
    try:
        return await fleet_starts(backends)
    except BackendUnavailable:
        return None


def forget(backends: Backends) -> None:
    """Drop the cached starts (a test that changed the fleet wants them now)."""
    _CACHE.pop(backends, None)


def warnings(
    schedule: Schedule,
    now: datetime,
    starts: Starts | None,
    herd_jobs: int,
    counted: bool,
    written: str = "",
    name: str = "",
) -> list[LintWarning]:
    """A schedule's warnings; the herd one when `starts` (the fleet's) is given; what an `H` of the
    expression as `written` is for the job `name`. Pure, on the compute thread: walks the schedule
    over the fleet's window."""
    found = lint(schedule.expression, schedule.timezone, now)
    if (note := hash_note(written, name)) is not None:
        found.insert(0, note)
    # Only minutes the job could make a herd of matter; most fleets have none, and the walk is skipped.
    busy = {} if starts is None else {i: n for i, n in enumerate(starts.counts) if n + 1 >= herd_jobs}
    if starts is not None and busy:
        end = starts.start + len(starts.counts) * MINUTE
        fires = schedule.fire_times(max(now, starts.start), end - timedelta(microseconds=1), limit=len(starts.counts))
        by_minute = {starts.start + i * MINUTE: n for i, n in busy.items()}
        if (herd := herd_warning(fires, by_minute, herd_jobs, counted=counted)) is not None:
            found.append(herd)
    return found


def schedule_or_none(expression: str | None, timezone: str, name: str = "") -> Schedule | None:
    """The current parser's schedule of a stored job (its name picks an `H`'s values), None for a
    one-off or a refused legacy row."""
    if expression is None:
        return None
    try:
        return parse_schedule(hashed(expression, name), timezone)
    except InvalidSchedule:  # a legacy row keeps its notice, not warnings
        return None
