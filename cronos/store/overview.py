"""The console's read of many jobs at once: each with its last run and its recent success."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from cronos.models import JobKind, JobStatus, RunState
from cronos.namespaces import DEFAULT as DEFAULT_NAMESPACE
from cronos.schedule_union import ScheduleEntry
from cronos.store import pages
from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import views as views_q

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
    schedules: list[ScheduleEntry] = []  # more schedules (cronos.schedule_union)
    spread: str | None = None  # ticks moved by the offset its name picks (cronos.spread)


def name_pattern(search: str | None) -> str | None:
    """`50%_off` -> `%50\\%\\_off%`: the text anywhere in the name, its wildcards taken literally."""
    if not search:
        return None
    escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class OverviewStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def jobs(
        self,
        status: str | None,
        search: str | None,
        after_id: int,
        limit: int,
        selector: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> list[JobRow]:
        """A page of the console's jobs list in `namespace`; `selector` a cronos.selectors.jsonpath (None: all)."""
        pattern = name_pattern(search)
        with translate_errors():
            if pattern is not None or selector is not None:
                rows = await self._filtered(status, pattern, after_id, limit, selector, namespace)
            elif status is not None:
                async with self._pool.acquire() as conn, conn.transaction():
                    await conn.execute(views_q.PAGE_PLAN)
                    rows = await conn.fetch(
                        views_q.JOB_OVERVIEW_STATUS, status, after_id, limit, RATE_OVER, RECENT, namespace
                    )
            else:
                rows = await self._pool.fetch(views_q.JOB_OVERVIEW, after_id, limit, RATE_OVER, RECENT, namespace)
        return [to_struct(row, JobRow) for row in rows]

    async def _filtered(
        self, status: str | None, pattern: str | None, after_id: int, limit: int, selector: str | None, namespace: str
    ) -> list[Any]:
        """A page with a name search or a selector: a slice by id, then, when it ends short, the
        search's or the selector's index (cronos.store.pages)."""
        args = (status, pattern, after_id, limit, RATE_OVER, RECENT, selector, pages.SLICE, namespace)
        head = await self._pool.fetch(views_q.JOB_OVERVIEW_FILTERED, *args)
        rows = [row for row in head if row["id"] is not None]
        if not pages.goes_on(len(rows), limit, head[0]["scanned"]):
            return rows
        after, wanted = head[0]["scanned_to"], limit - len(rows)
        if pattern is not None:
            rest_args = (status, pattern, after, wanted, RATE_OVER, RECENT, selector, namespace)
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(views_q.PAGE_PLAN)
                rest = await conn.fetch(views_q.JOB_OVERVIEW_SEARCHED, *rest_args)
        else:
            rest = await self._pool.fetch(
                views_q.JOB_OVERVIEW_SELECTED, status, after, wanted, RATE_OVER, RECENT, selector, namespace
            )
        return rows + list(rest)
