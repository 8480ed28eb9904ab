"""Run usage in PostgreSQL (migration 0046): written with the run's finish (cronos.store.finishes),
read here for one run. See cronos/run_usage.py for what is measured."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from cronos.run_usage import Usage
from cronos.store.db import translate_errors
from cronos.store.queries import usage as usage_q


async def of_run(pool: asyncpg.Pool, run_id: int, scheduled_for: datetime) -> Usage | None:
    """What run `run_id` (of tick `scheduled_for`) used; None when it was not measured."""
    with translate_errors():
        row = await pool.fetchrow(usage_q.USAGE_OF_RUN, run_id, scheduled_for)
    return None if row is None else Usage(**dict(row))
