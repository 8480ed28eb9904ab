"""Bulk registration for the scale benchmarks: many jobs copied from one the API created.

Registering 100,000 or a million jobs through `POST /api/jobs` takes longer than the benchmark
itself, so a benchmark creates one job through the API (the template: the API's defaults and
the store's insert path), then COPYs the others' names, expressions and labels into a temporary
table and derives every row from the template in three set-based statements, in one transaction:

- `jobs`: every column as the store's JOB_INSERT writes it (the template's, but the name, the
  expression and the labels), its cursor the transaction's now() as JOB_INSERT sets it, and
  the defaults (id, timestamps, webhook secret) drawn per row;
- `job_revisions`: revision 1 (`created`), as cronos.store.revisions.record writes it, its
  `changes` the template's with this job's name, expression and labels;
- `audit_log`: the `created` entry, as cronos.store.audit.record writes it, its snapshot the
  template's with this job's id, name, expression and labels.

The API would also have sent one `created` notification per job; a caller that registers
while a leader runs sends one resync request instead (`RESYNC`), or starts the leader after.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import msgspec

# One job to copy: (name, cron_expression, labels).
Spec = tuple[str, str, dict[str, str]]

BULK_TABLE = """
CREATE TEMP TABLE bulk_jobs (ord integer NOT NULL, name text NOT NULL, cron_expression text NOT NULL,
    labels text NOT NULL) ON COMMIT DROP
"""
# $1: the template job's id. Column for column JOB_INSERT's list, the template's values but the three copied.
BULK_JOBS = """
INSERT INTO jobs (name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, managed_by, parents, queue, run_at,
    start_at, end_at, max_runs, catchup_max_per_s, expectations, every, anchor, calendars, labels, owner,
    concurrency_group, hosts, chain, schedules, namespace, spread, last_scheduled_for)
SELECT b.name, b.cron_expression, t.timezone, t.kind, t.payload, t.timeout_s, t.max_retries, t.retry_backoff_s,
    t.concurrency_policy, t.misfire_policy, t.misfire_grace_s, t.jitter_s, t.status, t.managed_by, t.parents,
    t.queue, t.run_at, t.start_at, t.end_at, t.max_runs, t.catchup_max_per_s, t.expectations, t.every, t.anchor,
    t.calendars, b.labels::jsonb, t.owner, t.concurrency_group, t.hosts, t.chain, t.schedules, t.namespace, t.spread,
    least(now(), t.run_at - interval '1 microsecond')
FROM bulk_jobs b CROSS JOIN (SELECT * FROM jobs WHERE id = $1) t
ORDER BY b.ord
"""
# $1: the template job's id; the jobs after it are the copies (ids are drawn in order in one transaction).
BULK_REVISIONS = """
INSERT INTO job_revisions (job_id, number, kind, actor, status, fields, changes)
SELECT j.id, r.number, r.kind, r.actor, r.status, r.fields,
    r.changes || jsonb_build_object('name', j.name, 'cron_expression', j.cron_expression, 'labels', j.labels)
FROM jobs j CROSS JOIN (SELECT * FROM job_revisions WHERE job_id = $1 AND number = 1) r
WHERE j.id > $1
"""
BULK_AUDIT = """
INSERT INTO audit_log (actor, subject, action, job_id, token_name, before, after, detail)
SELECT a.actor, a.subject, a.action, j.id, a.token_name, a.before,
    a.after || jsonb_build_object('id', j.id, 'name', j.name, 'cron_expression', j.cron_expression, 'labels', j.labels),
    a.detail
FROM jobs j CROSS JOIN (SELECT * FROM audit_log WHERE job_id = $1 AND action = 'created') a
WHERE j.id > $1
ORDER BY j.id
"""
# A notification no job op names: the leader reloads what changed (dispatcher.ticker: a resync).
RESYNC = """SELECT pg_notify('cronos_jobs', '{"op": "resync"}')"""
_ANALYZE = ("ANALYZE jobs", "ANALYZE job_revisions", "ANALYZE audit_log")


async def copy_jobs(conn: asyncpg.Connection, template_id: int, specs: Sequence[Spec]) -> int:
    """Register `specs` as copies of job `template_id` (the newest job: the copies' ids follow it),
    in one transaction; then refresh the planner's statistics. How many were registered."""
    if await conn.fetchval("SELECT max(id) FROM jobs") != template_id:
        raise RuntimeError(f"job {template_id} must be the newest job: its copies are the jobs after it")
    encode = msgspec.json.encode
    async with conn.transaction():
        await conn.execute(BULK_TABLE)
        records = ((i, name, expr, encode(labels).decode()) for i, (name, expr, labels) in enumerate(specs))
        await conn.copy_records_to_table("bulk_jobs", records=records)
        status = await conn.execute(BULK_JOBS, template_id)
        await conn.execute(BULK_REVISIONS, template_id)
        await conn.execute(BULK_AUDIT, template_id)
    for statement in _ANALYZE:
        await conn.execute(statement)
    return int(status.split()[-1])
