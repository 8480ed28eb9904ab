"""What the answer to a job's create or change adds (api.routes_jobs): its schedule's warnings and,
for a change of schedule, the ticks the change adds and removes (docs/schedule-lint.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from api.backends import Backends
from api.compute import off_loop
from api.lint import fleet_starts_or_none, schedule_or_none, warnings
from api.routes_schedule import DIFF_DAYS, diff
from api.task_routing import action_warnings
from cronos.errors import InvalidSchedule
from cronos.hashed import hashed
from cronos.models import Job
from cronos.schedule_legacy import stored_schedule
from cronos.schedule_window import schedule_of


async def job_extras(backends: Backends, job: Job, previous: Job | None = None) -> dict[str, Any]:
    """`warnings` (its schedule's, then a task action no live executor serves) and, when a change
    gave a repeating job another schedule, `schedule_diff`."""
    unserved = await action_warnings(backends, job)
    schedule = schedule_or_none(job.cron_expression, job.timezone, job.name)
    if schedule is None:
        return {"warnings": unserved}
    starts = await fleet_starts_or_none(backends)
    now = datetime.now(UTC)
    extras: dict[str, Any] = {
        "warnings": [
            *await off_loop(
                warnings, schedule, now, starts, backends.settings.herd_jobs, False, job.cron_expression or "", job.name
            ),
            *unserved,
        ]
    }
    if previous is None or previous.cron_expression is None:
        return extras
    if _when(previous) == _when(job):
        return extras
    try:
        before = stored_schedule(hashed(previous.cron_expression, previous.name), previous.timezone)[0]
        moved = previous.schedules or job.schedules or previous.spread or job.spread  # a union, a spread
        unions = (schedule_of(previous)[0], schedule_of(job)[0]) if moved else None
    except InvalidSchedule:
        return extras
    extras["schedule_diff"] = await off_loop(diff, before, schedule, now, DIFF_DAYS, unions, previous.schedules)
    return extras


def _when(job: Job) -> tuple[object, ...]:
    """What a job's fire times follow (its name picks the values of an `H` and its spread's offset)."""
    return job.cron_expression, job.timezone, job.name, job.schedules, job.spread
