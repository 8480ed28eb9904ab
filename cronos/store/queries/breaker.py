"""The circuit breaker's statements (cronos.store.breaker; decisions in cronos.breaker). The leader
alone runs them, once a health interval: none is on the run path."""

from __future__ import annotations

# Active jobs failing at least once in a row (the partial index job_health_failing), with the
# breaker's last trip, a page of $1 after id $2; each job's threshold is cronos.breaker's to apply.
# Not locked: only the few the breaker trips are (JOB_LOCK_AT), so the leader's tick writes never
# wait behind a job that merely failed.
CANDIDATES = """
SELECT j.id, j.name, j.cron_expression, j.timezone, j.kind, j.payload, j.timeout_s, j.max_retries,
    j.retry_backoff_s, j.concurrency_policy, j.misfire_policy, j.misfire_grace_s, j.jitter_s, j.status, j.revision,
    j.last_scheduled_for, j.created_at, j.updated_at, j.managed_by, j.parents, j.queue, j.run_at, j.start_at,
    j.end_at, j.max_runs, j.catchup_max_per_s, j.expectations, j.every, j.anchor, j.calendars, j.paused_until,
    j.pause_note, j.labels, j.owner, j.concurrency_group, j.hosts, j.chain, j.schedules, j.namespace, j.spread,
    h.consecutive_failures, h.last_success_at, h.last_failure_at, b.tripped_at, b.tripped_streak
FROM job_health h
JOIN jobs j ON j.id = h.job_id
LEFT JOIN job_breakers b ON b.job_id = h.job_id
WHERE h.consecutive_failures > 0 AND j.status = 'active' AND j.id > $2
ORDER BY j.id
LIMIT $1
"""
# Job $1 locked, if it is still active at revision $2 as read (else, or while a change by hand
# holds it: no row, and the next pass reads it again).
JOB_LOCK_AT = "SELECT id FROM jobs WHERE id = $1 AND revision = $2 AND status = 'active' FOR UPDATE SKIP LOCKED"
# $1 job, $2 when, $3 the streak then, $4 the revision the pause left (the breaker holds the job).
TRIP_RECORD = """
INSERT INTO job_breakers (job_id, tripped_at, tripped_streak, held_revision, counted_from)
VALUES ($1, $2, $3, $4, $2)
ON CONFLICT (job_id) DO UPDATE SET tripped_at = EXCLUDED.tripped_at, tripped_streak = EXCLUDED.tripped_streak,
    held_revision = EXCLUDED.held_revision, counted_from = EXCLUDED.counted_from, canary_run_id = NULL,
    canary_tick = NULL
"""
# The jobs the breaker paused, a page of $1 after id $2, locked as above (cronos.breaker.holds
# says which it still holds).
HELD = """
SELECT j.id, j.name, j.cron_expression, j.timezone, j.kind, j.payload, j.timeout_s, j.max_retries,
    j.retry_backoff_s, j.concurrency_policy, j.misfire_policy, j.misfire_grace_s, j.jitter_s, j.status, j.revision,
    j.last_scheduled_for, j.created_at, j.updated_at, j.managed_by, j.parents, j.queue, j.run_at, j.start_at,
    j.end_at, j.max_runs, j.catchup_max_per_s, j.expectations, j.every, j.anchor, j.calendars, j.paused_until,
    j.pause_note, j.labels, j.owner, j.concurrency_group, j.hosts, j.chain, j.schedules, j.namespace, j.spread,
    b.held_revision, b.counted_from, b.canary_run_id, b.canary_tick
FROM job_breakers b
JOIN jobs j ON j.id = b.job_id
WHERE b.held_revision IS NOT NULL AND j.id > $2
ORDER BY j.id
LIMIT $1
FOR UPDATE OF j SKIP LOCKED
"""
# $1 job: held at revision $2 (NULL: let go), ticks counted after $3, the canary $4 at tick $5.
HOLD_SET = """
UPDATE job_breakers SET held_revision = $2, counted_from = $3, canary_run_id = $4, canary_tick = $5
WHERE job_id = $1
"""
# The state of job $1's canary $3 (its tick $2, the partition key), and whether the health
# evaluator counted its end (a success it counted is its job's newest); no row: deleted.
CANARY_STATE = """
SELECT r.state, coalesce(h.last_success_at >= r.finished_at, false) AS counted
FROM runs r
LEFT JOIN job_health h ON h.job_id = r.job_id
WHERE r.job_id = $1 AND r.scheduled_for = $2 AND r.id = $3
"""
