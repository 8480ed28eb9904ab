"""Job events in PostgreSQL: written once per fact (`dedupe_key`), read back for routing."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import msgspec

from cronos.events import JobEvent

INSERT_EVENTS = """
INSERT INTO job_events (job_id, run_id, kind, occurred_at, dedupe_key, detail)
SELECT e.job_id, e.run_id, e.kind, e.occurred_at, e.dedupe_key, e.detail::jsonb
  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::text[], $6::text[])
       AS e (job_id, run_id, kind, occurred_at, dedupe_key, detail)
  JOIN jobs ON jobs.id = e.job_id  -- a job deleted meanwhile has no events,
  FOR KEY SHARE OF jobs  -- nor one being deleted: waited for, then left out (the key check would fail)
ON CONFLICT (dedupe_key) DO NOTHING
"""


async def insert_events(conn: asyncpg.Connection, events: Sequence[JobEvent]) -> int:
    """Write `events` (each fact once); returns how many were new. The caller fences and commits."""
    if not events:
        return 0
    status: str = await conn.execute(
        INSERT_EVENTS,
        [e.job_id for e in events],
        [e.run_id for e in events],
        [str(e.kind) for e in events],
        [e.occurred_at for e in events],
        [e.dedupe_key for e in events],
        [msgspec.json.encode(dict(e.detail)).decode() for e in events],
    )
    return int(status.rsplit(" ", 1)[-1])
