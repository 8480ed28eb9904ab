"""Job health (the leader's, cronos.store.health; its writes fenced by the epoch)."""

from __future__ import annotations

# --- job health (leader, cronos.store.health; writes fenced) -------------------------------------

# Sent first in the transaction of a read of a job's newest runs (runs_job_newest): over partitions,
# the newest N of a job must be a merge of each partition's index, not a sort of all its runs, which
# stale statistics (an empty new day) make the planner pick (as OUTBOX_PLAN does for the outbox).
HEALTH_PLAN = "SET LOCAL enable_sort = off"
# How far the scan of runs that ended unhappily went, and PostgreSQL's clock (the scan's upper bound).
HEALTH_SCAN_FROM = "SELECT scanned_to, clock_timestamp() AS now FROM health_scan WHERE id = 1"
HEALTH_SCAN_MOVE = "UPDATE health_scan SET scanned_to = greatest(scanned_to, $1) WHERE id = 1"
# Runs that ended failed, skipped or cancelled after ($1 finished_at, $2 id) and by $3, at most $4, in
# end order: a walk of the partial index runs_unhappy_finished (completed runs are not in it). For a
# failure, whether its tick has a next attempt (a retry queued in the failure's own transaction):
# one probe of the (job_id, scheduled_for, attempt) unique key.
HEALTH_ENDED = """
SELECT r.id AS run_id, r.job_id, r.state, r.scheduled_for, r.attempt, r.finished_at, r.error, r.skip_reason,
       r.state = 'failed' AND EXISTS (SELECT 1 FROM runs n WHERE n.job_id = r.job_id
           AND n.scheduled_for = r.scheduled_for AND n.attempt = r.attempt + 1) AS retried
FROM runs r
WHERE r.state IN ('failed', 'skipped', 'cancelled') AND (r.finished_at, r.id) > ($1::timestamptz, $2::bigint)
  AND r.finished_at <= $3
ORDER BY r.finished_at, r.id
LIMIT $4
"""
# The health rows of the jobs $1, and every row whose verdict is not ok (to clear when its cause ends).
HEALTH_ROWS = """
SELECT job_id, verdict, reason, consecutive_failures, last_success_at, last_failure_at, last_failure_run_id,
    missed_at, judged_run_id
FROM job_health
WHERE job_id = ANY($1::bigint[])
UNION
SELECT job_id, verdict, reason, consecutive_failures, last_success_at, last_failure_at, last_failure_run_id,
    missed_at, judged_run_id
FROM job_health
WHERE verdict <> 'ok'
"""
# Each of the jobs $1's newest completed run (by id) among its newest $2 runs (runs_job_newest: at
# most $2 entries a job, whatever its history; after HEALTH_PLAN).
HEALTH_NEWEST_SUCCESS = """
SELECT f.job_id, c.id AS run_id, c.finished_at
FROM unnest($1::bigint[]) AS f(job_id)
CROSS JOIN LATERAL (SELECT id, finished_at FROM (SELECT id, state, finished_at FROM runs WHERE job_id = f.job_id
    ORDER BY id DESC LIMIT $2) recent WHERE state = 'completed' LIMIT 1) c
"""
# The jobs with expectations (jobs_expecting) and the jobs $1 (their channels ask for run events:
# HEALTH_ANNOUNCING_JOBS), each with how far its runs were judged.
HEALTH_EXPECTING = """
SELECT j.id AS job_id, j.expectations, j.revision, j.status, j.updated_at, coalesce(h.judged_run_id, 0) AS judged_run_id
FROM jobs j
LEFT JOIN job_health h ON h.job_id = j.id
WHERE j.expectations IS NOT NULL OR j.id = ANY($1::bigint[])
"""
# The enabled channels that ask for run events (started, completed, ended: cronos.events.RUN_KINDS),
# with their scopes: a handful of rows, none for a cluster whose channels ask for none.
HEALTH_ANNOUNCING_CHANNELS = """
SELECT job_ids, queues, selector, events
FROM notification_channels
WHERE enabled AND events && ARRAY['started', 'completed', 'ended']
"""
# The jobs one such channel may hear of: every job ($1), or the jobs $2, the jobs of the queues $3 and
# those whose labels match the path $4 (cronos.selectors.jsonpath; NULL: none). The router decides
# exactly (cronos.notify.rules.applies): this only picks the jobs whose runs the evaluator reads.
HEALTH_ANNOUNCING_JOBS = """
SELECT id
FROM jobs
WHERE $1 OR id = ANY($2::bigint[]) OR queue = ANY($3::text[]) OR coalesce(labels @@ $4::jsonpath, false)
"""
# Runs of the jobs $1 after the run ids $2, at most $3 a job, by id (runs_job_newest); a job never
# judged ($2 = 0) starts from its newest $3 runs, not from its whole history.
HEALTH_RUNS_AFTER = """
SELECT f.job_id, r.id AS run_id, r.state, r.scheduled_for, r.attempt, r.revision, r.started_at, r.finished_at,
    r.duration_ms
FROM unnest($1::bigint[], $2::bigint[]) AS f(job_id, after_id)
CROSS JOIN LATERAL (
    (SELECT id, state, scheduled_for, attempt, revision, started_at, finished_at, duration_ms FROM runs
     WHERE job_id = f.job_id AND id > f.after_id AND f.after_id > 0 ORDER BY id LIMIT $3)
    UNION ALL
    (SELECT id, state, scheduled_for, attempt, revision, started_at, finished_at, duration_ms FROM runs
     WHERE job_id = f.job_id AND f.after_id = 0 ORDER BY id DESC LIMIT $3)) r
ORDER BY f.job_id, r.id
"""
# The expectations in force at revision $2[i] of job $1[i]: those the newest revision at or before
# it set (job_revisions_expectations); no row: never set (or set to null).
HEALTH_EXPECTATIONS_AT = """
SELECT f.job_id, f.number, e.changes -> 'expectations' AS expectations
FROM unnest($1::bigint[], $2::integer[]) AS f(job_id, number)
CROSS JOIN LATERAL (SELECT changes FROM job_revisions WHERE job_id = f.job_id AND number <= f.number
    AND 'expectations' = ANY(fields) ORDER BY number DESC LIMIT 1) e
WHERE jsonb_typeof(e.changes -> 'expectations') = 'object'
"""
# Running runs (runs_owned_lease: as many as executors run at once) with their job's timeout,
# expectations and revision, and PostgreSQL's clock.
HEALTH_RUNNING = """
SELECT r.id AS run_id, r.job_id, r.scheduled_for, r.attempt, r.revision, r.started_at, j.timeout_s,
    j.expectations, j.revision AS job_revision, clock_timestamp() AS now
FROM runs r
JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'running' AND r.lease_until IS NOT NULL
"""
# Health rows as the evaluator leaves them: one per element of the arrays.
HEALTH_UPSERT = """
INSERT INTO job_health (job_id, verdict, reason, consecutive_failures, last_success_at, last_failure_at,
    last_failure_run_id, missed_at, judged_run_id, updated_at)
SELECT u.*, now()
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::integer[], $5::timestamptz[], $6::timestamptz[],
    $7::bigint[], $8::timestamptz[], $9::bigint[]) AS u(job_id, verdict, reason, consecutive_failures,
    last_success_at, last_failure_at, last_failure_run_id, missed_at, judged_run_id)
JOIN jobs ON jobs.id = u.job_id
ON CONFLICT (job_id) DO UPDATE SET verdict = EXCLUDED.verdict, reason = EXCLUDED.reason,
    consecutive_failures = EXCLUDED.consecutive_failures, last_success_at = EXCLUDED.last_success_at,
    last_failure_at = EXCLUDED.last_failure_at, last_failure_run_id = EXCLUDED.last_failure_run_id,
    missed_at = greatest(job_health.missed_at, EXCLUDED.missed_at), judged_run_id = EXCLUDED.judged_run_id,
    updated_at = now()
"""
# The auditor's missed ticks: job $1[i]'s newest missed tick $2[i]; a row whose verdict is ok, late or
# unknown becomes missing (a worse one stays: the evaluator's next pass settles it).
HEALTH_MISSED = """
INSERT INTO job_health (job_id, verdict, reason, missed_at)
SELECT u.job_id, 'missing', 'a tick has no run and no recorded skip', u.missed_at
FROM unnest($1::bigint[], $2::timestamptz[]) AS u(job_id, missed_at)
JOIN jobs ON jobs.id = u.job_id
ON CONFLICT (job_id) DO UPDATE SET missed_at = greatest(job_health.missed_at, EXCLUDED.missed_at),
    verdict = CASE WHEN job_health.verdict IN ('ok', 'late', 'unknown') THEN 'missing' ELSE job_health.verdict END,
    reason = CASE WHEN job_health.verdict IN ('ok', 'late', 'unknown') THEN EXCLUDED.reason ELSE job_health.reason END,
    updated_at = now()
"""
# The API's view of a job's health ($1): its row (none: never judged) and its newest success among
# its newest $2 runs (after HEALTH_PLAN).
HEALTH_OF_JOBS = """
SELECT j.id AS job_id, h.verdict, h.reason, h.consecutive_failures, h.last_success_at, h.last_failure_at,
    h.missed_at, h.updated_at, (SELECT c.finished_at FROM (SELECT state, finished_at FROM runs WHERE job_id = j.id
        ORDER BY id DESC LIMIT $2) c WHERE c.state = 'completed' LIMIT 1) AS newest_success
FROM jobs j
LEFT JOIN job_health h ON h.job_id = j.id
WHERE j.id = ANY($1::bigint[])
ORDER BY j.id
"""
# Per-job metrics (leader): the jobs whose names match $1 (LIKE patterns; empty: any), at most $2 by
# id, how many match in all (beyond the cap: dropped), and each one's streak of failures and newest
# success (its health row's, or the newest among its newest $3 runs; after HEALTH_PLAN).
HEALTH_METRICS = """
WITH chosen AS (SELECT id, name, labels, count(*) OVER () AS total FROM jobs
    WHERE cardinality($1::text[]) = 0 OR name LIKE ANY($1::text[]) ORDER BY id LIMIT $2)
SELECT c.id AS job_id, c.name, c.labels, c.total, coalesce(h.consecutive_failures, 0) AS consecutive_failures,
    greatest(h.last_success_at, (SELECT r.finished_at FROM (SELECT state, finished_at FROM runs
        WHERE job_id = c.id ORDER BY id DESC LIMIT $3) r WHERE r.state = 'completed' LIMIT 1)) AS last_success_at
FROM chosen c
LEFT JOIN job_health h ON h.job_id = c.id
ORDER BY c.id
"""
