"""The fleet's active repeating jobs, grouped for cronos.fleet_starts (one grouped read)."""

from __future__ import annotations

import asyncpg

from cronos.fleet_starts import Group
from cronos.hashed import has_hash
from cronos.store.db import translate_errors
from cronos.store.queries import views as views_q


class FleetStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def groups(self) -> list[Group]:
        """Active cron jobs by (expression, zone, jitter, spread), the largest groups first; a group whose
        expression has an `H`, or with a spread, with its jobs' names (and ids), which pick its values."""
        with translate_errors():
            rows = await self._pool.fetch(views_q.FLEET_GROUPS)
            hashed = [r["cron_expression"] for r in rows if has_hash(r["cron_expression"])]
            spread = any(r["spread"] is not None for r in rows)
            named = await self._pool.fetch(views_q.FLEET_HASHED_JOBS, hashed) if hashed or spread else []
        jobs = {(r["cron_expression"], r["timezone"], r["jitter_s"], r["spread"]): r for r in named}
        out = []
        for r in rows:
            key = (r["cron_expression"], r["timezone"], r["jitter_s"], r["spread"])
            ids, names = (tuple(jobs[key]["ids"]), tuple(jobs[key]["names"])) if key in jobs else (r["ids"] or (), ())
            out.append(
                Group(r["cron_expression"], r["timezone"], r["jitter_s"], r["jobs"], tuple(ids), names, r["spread"])
            )
        return out
