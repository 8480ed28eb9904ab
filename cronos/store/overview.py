"""The console's read of many jobs at once: each with its last run and its recent success."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from cronos.models import JobKind, JobStatus, RunState
from cronos.store import queries as q
from cronos.store.db import to_struct, translate_errors

RATE_OVER = 20  # the success rate is over a job's last this many finished runs ...
RECENT = 200  # ... among its newest this many runs (a bound on each job's read, whatever its runs' states)


class JobRow(msgspec.Struct, kw_only=True):
    id: int
    name: str
    cron_expression: str | None  # None: a one-off
    timezone: str
    kind: JobKind
    status: JobStatus
    run_id: int | None
    run_state: RunState | None
    run_scheduled_for: datetime | None
    run_due_at: datetime | None
    run_started_at: datetime | None
    run_duration_ms: float | None
    completed: int
    finished: int
    every: str | None = None  # an interval (cronos.interval)
    anchor: datetime | None = None


def name_pattern(search: str | None) -> str | None:
    """`50%_off` -> `%50\\%\\_off%`: the text anywhere in the name, its wildcards taken literally."""
    if not search:
        return None
    escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class OverviewStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def jobs(self, status: str | None, search: str | None, after_id: int, limit: int) -> list[JobRow]:
        with translate_errors():
            rows = await self._pool.fetch(
                q.JOB_OVERVIEW, status, name_pattern(search), after_id, limit, RATE_OVER, RECENT
            )
        return [to_struct(row, JobRow) for row in rows]
