"""Reads for tick accountability (GET /api/jobs/{id}/ticks): a job's history and its ledger rows.

The outcome of each tick is computed by the pure cronos.ticks from what these return.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from cronos.errors import NotFound
from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import views as views_q
from cronos.store.revisions import Revision
from cronos.ticks import LedgerRow


class TickStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def history(
        self, job_id: int, after: datetime, until: datetime, most: int
    ) -> tuple[list[Revision], datetime | None]:
        """The revisions of the job that touch the window (after, until], oldest first, and its
        cursor (None: deleted): its creation, the one in force at `after` and at most `most` of
        those within the window. Each revision's `changes` hold only its schedule fields, the one
        in force at `after` all of them as it left them (so folding the list in order gives each
        revision's schedule); payloads are never read. NotFound for an id that never was a job."""
        with translate_errors():
            async with self._pool.acquire() as conn:
                rows = await conn.fetch(views_q.TICK_REVISIONS, job_id, after, until, most)
                cursor: datetime | None = await conn.fetchval(views_q.TICK_CURSOR, job_id)
                if not rows and not await conn.fetchval(jobs_q.REVISION_JOB_KNOWN, job_id):
                    raise NotFound(f"job {job_id} not found")
                revisions = [to_struct(row, Revision) for row in rows]
                before = [r for r in revisions if r.at <= after]
                base = max(before, key=lambda r: (r.at, r.number), default=None)
                if base is not None and base.number != 1:
                    schedule = await conn.fetchval(views_q.TICK_SCHEDULE_AT, job_id, base.number)
                    revisions = [msgspec.structs.replace(r, changes=schedule) if r is base else r for r in revisions]
        return revisions, cursor

    async def ledger(self, job_id: int, after: datetime, until: datetime) -> list[LedgerRow]:
        """The ledger rows of the job's ticks in (after, until], by tick then attempt."""
        with translate_errors():
            rows = await self._pool.fetch(views_q.TICK_RUNS, job_id, after, until)
        return [to_struct(row, LedgerRow) for row in rows]
