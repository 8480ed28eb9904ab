"""The fleet's active repeating jobs, grouped for cronos.fleet_starts (one grouped read)."""

from __future__ import annotations

import asyncpg

from cronos.fleet_starts import Group
from cronos.store import queries as q
from cronos.store.db import translate_errors


class FleetStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def groups(self) -> list[Group]:
        """Active cron jobs by (expression, zone, jitter), the largest groups first."""
        with translate_errors():
            rows = await self._pool.fetch(q.FLEET_GROUPS)
        return [
            Group(r["cron_expression"], r["timezone"], r["jitter_s"], r["jobs"], tuple(r["ids"] or ())) for r in rows
        ]
