"""Every SQL statement Cronos runs, as a named constant. Run only by the store classes.

Sections: jobs (API), ledger and outbox (dispatcher), runs (executor), leader epoch, and the
API's reads. Each statement is written out as PostgreSQL runs it (grep for a clause and find it),
and each transition of cronos.lifecycle is one statement guarded by its from-state.

Plans that do not depend on fresh statistics. The runs table grows by up to thousands of
rows a second, faster than autovacuum's analyze, and a backlog of queued runs can appear
in minutes; planned with statistics that say "no queued run", a statement that filters a
batch of ids by `state = 'queued'` reads the whole queued-runs partial index on every call
(seconds at a 100k backlog). So a statement that works on given run ids first locks them
by primary key in a MATERIALIZED CTE that names no state (only the primary key can serve
it), in id order (every statement that locks runs takes them in the same order: no
deadlock between a claim, a heartbeat and a finish), then tests their state on the locked
rows and updates by id alone. `tests/integration/test_query_plans.py` checks this against a
stale-statistics backlog.
"""

from __future__ import annotations

# The channel the API notifies in the same transaction as each job write, and on each
# manual trigger. Payload: JSON {"op": "...", "job_id": N}; op is one of
# created, updated, deleted, paused, resumed, triggered; and retry, chain, woken (runs queued by a finish);
# rules (a calendar or blackout changed: job_id null, the leader reloads them).
JOBS_CHANNEL = "cronos_jobs"

NOTIFY = "SELECT pg_notify('cronos_jobs', $1)"
NOTIFY_EACH = "SELECT pg_notify('cronos_jobs', payload) FROM unnest($1::text[]) AS payload"
# The channel the API notifies, in the transaction of a running run's cancel request, for the
# executor running it (cronos.store.cancels.listen). Payload: JSON {"run_id": N, "by": "who"}.
CANCELS_CHANNEL = "cronos_cancels"
NOTIFY_CANCEL = "SELECT pg_notify('cronos_cancels', $1)"

# A liveness probe, which also reads PostgreSQL's clock (unix time): the clock due times are
# judged by (cronos.clock).
PING = "SELECT extract(epoch FROM clock_timestamp())::float8"

# --- jobs (API) ---------------------------------------------------------------


# The cursor starts at creation: only ticks strictly after the job exists are due; a one-off
# created just after its run_at still has it due (the misfire grace decides; least() skips NULL).
# Never before $29, the first usable instant: a run_at there would put the cursor outside the
# range, and the leader skip the job as unusable (that tick is past any grace anyway).
JOB_INSERT = """
INSERT INTO jobs (name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, managed_by, parents, queue, run_at,
    start_at, end_at, max_runs, catchup_max_per_s, expectations, every, anchor, calendars, labels, owner,
    concurrency_group, last_scheduled_for)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24,
    $25, $26, $27, $28,
    greatest(least(now(), $17::timestamptz - interval '1 microsecond'), $29))
RETURNING id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group
"""
JOB_GET = """
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group
FROM jobs
WHERE id = $1
"""
JOB_GET_FOR_UPDATE = """
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group
FROM jobs
WHERE id = $1 FOR UPDATE
"""
# $1 last id seen (0 for the first page), $2 limit.
# A page of jobs by id: at most $2 rows, and cut once the payloads before a row reach $3 bytes
# of JSON (a page holds at least one job), so a page of big payloads stays small; `fetched` says
# how many rows the page had before the cut (more than returned: the client pages on).
JOB_LIST = """
WITH page AS (SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries,
    retry_backoff_s, concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision,
    last_scheduled_for, created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs,
    catchup_max_per_s, expectations, every, anchor, calendars, paused_until, pause_note, labels, owner,
    concurrency_group, octet_length(payload::text) AS size FROM jobs
    WHERE id > $1 ORDER BY id LIMIT $2),
    sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    (SELECT count(*) FROM page) AS fetched
FROM sized
WHERE before < $3
ORDER BY id
"""
# Sent first, in the same transaction, before a page whose best plan depends on its value (a
# status, a name search): a generic plan (a prepared statement's, after five runs) cannot tell a
# status few jobs have from one all have, nor read a pattern's trigrams, and walks every job.
PAGE_PLAN = "SET LOCAL plan_cache_mode = force_custom_plan"
# JOB_LIST of the jobs in status $1, through jobs_status_id (status, id) (PAGE_PLAN first: a million
# jobs, none paused, and `?status=paused` read them all).
JOB_LIST_STATUS = """
WITH page AS (SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries,
    retry_backoff_s, concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision,
    last_scheduled_for, created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs,
    catchup_max_per_s, expectations, every, anchor, calendars, paused_until, pause_note, labels, owner,
    concurrency_group, octet_length(payload::text) AS size FROM jobs
    WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3),
    sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    (SELECT count(*) FROM page) AS fetched
FROM sized
WHERE before < $4
ORDER BY id
"""
# A filtered page (a selector, a name search) reads jobs by id from the cursor, at most $6 of them
# (a slice, read through the primary key whatever the filter: no plan can walk every job for a
# filter that matches few), and keeps those that match; when the slice ends before the page is
# full, the page goes on from the slice's end through the filter's index (JOB_LIST_SELECTED_INDEXED,
# JOB_OVERVIEW_SEARCHED, JOB_OVERVIEW_SELECTED: cronos.store.pages decides). A broad filter fills
# its page from the slice; a narrow one is found through its index, which reads only its matches.
# JOB_LIST of the slice's jobs whose labels match the selector $5 (cronos.selectors.jsonpath). Its
# first row says how many jobs the slice read and the last one's id; a row without an id stands
# for none matching. `before` and `size`: the page's payload bytes, for the rest of the page.
JOB_LIST_SELECTED = """
WITH slice AS MATERIALIZED (SELECT id, status, labels FROM jobs WHERE id > $2 ORDER BY id LIMIT $6),
    page AS (SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries,
    retry_backoff_s, concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision,
    last_scheduled_for, created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs,
    catchup_max_per_s, expectations, every, anchor, calendars, paused_until, pause_note, labels, owner,
    concurrency_group, octet_length(payload::text) AS size FROM jobs
    WHERE id IN (SELECT id FROM slice WHERE ($1::text IS NULL OR status = $1) AND labels @@ $5::jsonpath
        ORDER BY id LIMIT $3)),
    sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.payload, p.timeout_s, p.max_retries,
    p.retry_backoff_s, p.concurrency_policy, p.misfire_policy, p.misfire_grace_s, p.jitter_s, p.status, p.revision,
    p.last_scheduled_for, p.created_at, p.updated_at, p.managed_by, p.parents, p.queue, p.run_at, p.start_at,
    p.end_at, p.max_runs, p.catchup_max_per_s, p.expectations, p.every, p.anchor, p.calendars, p.paused_until,
    p.pause_note, p.labels, p.owner, p.concurrency_group, p.before, p.size,
    (SELECT count(*) FROM page) AS fetched, s.scanned, s.scanned_to
FROM (SELECT count(*) AS scanned, max(id) AS scanned_to FROM slice) s
LEFT JOIN sized p ON p.before < $4
ORDER BY p.id
"""
# The rest of a selector's page (JOB_LIST_SELECTED) through the GIN index jobs_labels (migration
# 0034): the jobs after $2 that match $5, the first $3 by id, cut at $4 payload bytes as JOB_LIST.
# The matches are read whole, then cut at $2: a plan that met the index with the id range read the
# primary key's every entry past $2 (a filter reaches here only when it is narrow).
JOB_LIST_SELECTED_INDEXED = """
WITH hits AS MATERIALIZED (SELECT id FROM jobs WHERE labels @@ $5::jsonpath AND ($1::text IS NULL OR status = $1)),
    page AS (SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries,
    retry_backoff_s, concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision,
    last_scheduled_for, created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs,
    catchup_max_per_s, expectations, every, anchor, calendars, paused_until, pause_note, labels, owner,
    concurrency_group, octet_length(payload::text) AS size FROM jobs
    WHERE id IN (SELECT id FROM hits WHERE id > $2 ORDER BY id LIMIT $3)),
    sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    (SELECT count(*) FROM page) AS fetched
FROM sized
WHERE before < $4
ORDER BY id
"""
# $2.. the writable fields (cronos.models.JOB_WRITABLE's order: tests/unit/test_queries.py), then
# the new revision number; then true when
# the schedule changed: the cursor moves to the change instant, backwards too (ticks written ahead
# under the old schedule were just handed over: cronos.store.revisions), and ticks planned under
# an older revision can no longer be written; then true on a resume: the cursor moves past the
# paused time (greatest() ignores NULL), so that time is not caught up.
JOB_UPDATE = """
UPDATE jobs
SET name = $2, cron_expression = $3, timezone = $4, kind = $5, payload = $6, timeout_s = $7, max_retries = $8,
    retry_backoff_s = $9, concurrency_policy = $10, misfire_policy = $11, misfire_grace_s = $12, jitter_s = $13,
    status = $14, managed_by = $15, parents = $16, queue = $17, run_at = $18, start_at = $19, end_at = $20,
    max_runs = $21, catchup_max_per_s = $22, expectations = $23, every = $24, anchor = $25, calendars = $26,
    labels = $27, owner = $28, concurrency_group = $29, revision = $30,
    plan_revision = CASE WHEN $31::boolean THEN $30 ELSE plan_revision END,
    last_scheduled_for = CASE WHEN $31::boolean THEN now() WHEN $32::boolean THEN greatest(last_scheduled_for,
    now()) ELSE last_scheduled_for END, updated_at = now(),
    paused_until = CASE WHEN $14 = 'paused' THEN paused_until END,
    pause_note = CASE WHEN $14 = 'paused' THEN pause_note END
WHERE id = $1
RETURNING id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group
"""
# $2 'active' or 'paused' (a change: the caller read the row locked), $3 the new revision number,
# $4 when the leader lifts the pause (null: never) and $5 its note (both null on a resume).
# In SET, `status` is the old value, so a resume moves the cursor past the paused time.
JOB_SET_STATUS = """
UPDATE jobs
SET status = $2, revision = $3, paused_until = $4, pause_note = $5, last_scheduled_for = CASE WHEN status = 'paused'
  AND $2 = 'active' THEN greatest(last_scheduled_for, now()) ELSE last_scheduled_for END, updated_at = now()
WHERE id = $1
RETURNING id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group
"""
# The signing secret, only where the API shows it: after a create, and on rotation.
JOB_WEBHOOK_SECRET = "SELECT webhook_secret FROM jobs WHERE id = $1"
JOB_ROTATE_WEBHOOK_SECRET = """
UPDATE jobs
SET webhook_secret = cronos_new_webhook_secret(), updated_at = now()
WHERE id = $1
RETURNING webhook_secret
"""
JOB_DELETE = "DELETE FROM jobs WHERE id = $1 RETURNING id"
JOB_COUNT_BY_STATUS = "SELECT status, count(*) AS n FROM jobs GROUP BY status"
# The queues jobs name, each once: a skip scan of the jobs_queue index (one probe per queue, not a
# read of every job), for the leader's dropping of idle queues and the cap on their number.
QUEUES_NAMED = """
WITH RECURSIVE named (queue) AS (
    (SELECT queue FROM jobs ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobs j WHERE j.queue > named.queue ORDER BY j.queue LIMIT 1)
    FROM named
    WHERE named.queue IS NOT NULL
)
SELECT queue FROM named WHERE queue IS NOT NULL
"""
# Job $1's queue when no other job names it (the queue goes if the job leaves it); no row otherwise.
QUEUE_NAMED_ONLY_BY = """
SELECT j.queue FROM jobs j
WHERE j.id = $1 AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.queue = j.queue AND o.id <> j.id)
"""
# A manual trigger: one queued run due now, even for a paused job. No row: the job is
# missing, or (vanishingly rare) a run with the same tick identity exists; retry then.
RUN_INSERT_MANUAL = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision)
SELECT id, now(), 1, 'manual', 'queued', now(), revision
FROM jobs
WHERE id = $1
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id
"""
RUN_GET = """
SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id,
    waiting_for
FROM runs
WHERE id = $1
"""
RUN_LAST_OF_JOB = """
SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id
FROM runs
WHERE job_id = $1
ORDER BY id DESC
LIMIT 1
"""
# Newest tick first, then newest id (a retry after its first attempt). $2 state filter or NULL,
# ($3 scheduled_for, $4 id) of the last run seen or NULLs, $5 limit, $6 the window's oldest
# tick or NULL. Partitions are by scheduled_for, so ordered by it a page could be read newest day
# first and stop once full, but runs_default (which may hold any tick) makes PostgreSQL merge
# every day's runs_job_tick instead: the store asks for a window of recent days first ($6),
# which prunes the older days, and looks further back only when the page is not full.
RUN_LIST_OF_JOB = """
SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id
FROM runs
WHERE job_id = $1 AND ($2::text IS NULL OR state = $2) AND scheduled_for >= coalesce($6::timestamptz,
    '-infinity')
  AND scheduled_for <= coalesce($3::timestamptz, 'infinity') AND (scheduled_for,
      id) < (coalesce($3::timestamptz, 'infinity'), coalesce($4::bigint, 0))
ORDER BY scheduled_for DESC, id DESC
LIMIT $5
"""
# The tick of the run an "id:" cursor names (cursors from before 0018), so the walk goes on in tick order.
RUN_TICK_OF_JOB = "SELECT scheduled_for FROM runs WHERE id = $1 AND job_id = $2"
JOB_EXISTS = "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)"

# --- cancel (API, cronos.store.cancels) -------------------------------------------

# The run $1, locked against a claim, a finish or a wake while its cancel is decided (the API's
# cancel reads it by id alone: every partition, once per operator's click).
# The concurrency group of the run $1's job (NULL: none): a cancel locks it (GROUPS_LOCK) before the
# run, in the order a claim takes them, so freeing the run's slot cannot deadlock with a claim.
RUN_JOB_FOR_CANCEL = "SELECT j.concurrency_group, j.kind FROM runs r JOIN jobs j ON j.id = r.job_id WHERE r.id = $1"
RUN_LOCK_FOR_CANCEL = """
SELECT id, job_id, scheduled_for, state FROM runs WHERE id = $1 FOR NO KEY UPDATE
"""
# queued or waiting -> cancelled (Event.CANCELLED): the run $1 of tick $2, with its error $3 (who).
RUN_CANCEL = """
UPDATE runs SET state = 'cancelled', error = $3, finished_at = now(), pushed_epoch = NULL
WHERE id = $1 AND scheduled_for = $2 AND state IN ('queued', 'waiting')
RETURNING id
"""
# The record of a cancel, and for a running run its executor's request (Event.CANCEL_REQUESTED):
# $1 run, $2 job, $3 tick, $4 who. A second request of the same run is left alone (no row).
RUN_CANCEL_REQUEST = """
INSERT INTO run_cancels (run_id, job_id, scheduled_for, requested_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (run_id) DO NOTHING
RETURNING requested_by
"""
RUN_CANCEL_OF = "SELECT requested_by FROM run_cancels WHERE run_id = $1"  # who asked first

# --- all runs (API, read only; cronos.store.run_views) and "retry this run" (cronos.store.reruns) ---

# GET /api/runs: newest run first (by id, the order runs entered the ledger), a page from a scan of
# at most $4 index entries below the cursor $1, so a filter that matches rarely costs no more than
# one that matches every run: the page is then short, and the caller goes on from the last entry
# scanned. Four statements, one per index (a generic plan cannot switch indexes on a NULL): every
# run (the primary key) or one job's ($11, runs_job_newest), and those ended failed, skipped or
# cancelled (runs_unhappy_newest, runs_unhappy_job: migration 0030). [$2, $3): whole UTC days
# holding the time range (NULL: open), which prune the day partitions and cut no row of them;
# the exact range [$7, $8) on scheduled_for is tested with the other filters: $5 states, $6
# trigger, $9 queue (each NULL: any). $10 the page size. The scan is read lazily: a page that
# fills stops it there; a short one reads it to its end, and its last row comes after the hits
# (`scan_end`, with how many entries the scan read).
RUNS_PAGE = """
WITH scanned AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
        finished_at, lease_until, duration_ms, error, skip_reason, created_at, parent_run_id
    FROM runs
    WHERE id < $1 AND scheduled_for >= coalesce($2::timestamptz, '-infinity')
      AND scheduled_for < coalesce($3::timestamptz, 'infinity')
    ORDER BY id DESC
    LIMIT $4),
hits AS (
    SELECT * FROM scanned
    WHERE ($5::text[] IS NULL OR state = ANY($5::text[])) AND ($6::text IS NULL OR trigger = $6)
      AND scheduled_for >= coalesce($7::timestamptz, '-infinity') AND scheduled_for < coalesce($8::timestamptz,
          'infinity')
      AND ($9::text IS NULL OR job_id IN (SELECT j.id FROM jobs j WHERE j.queue = $9))
    LIMIT $10)
SELECT false AS scan_end, NULL::bigint AS scanned, * FROM hits
UNION ALL
(SELECT true, count(*) OVER (), * FROM scanned ORDER BY id LIMIT 1)
LIMIT $10
"""
RUNS_PAGE_OF_JOB = """
WITH scanned AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
        finished_at, lease_until, duration_ms, error, skip_reason, created_at, parent_run_id
    FROM runs
    WHERE job_id = $11 AND id < $1 AND scheduled_for >= coalesce($2::timestamptz, '-infinity')
      AND scheduled_for < coalesce($3::timestamptz, 'infinity')
    ORDER BY job_id, id DESC
    LIMIT $4),
hits AS (
    SELECT * FROM scanned
    WHERE ($5::text[] IS NULL OR state = ANY($5::text[])) AND ($6::text IS NULL OR trigger = $6)
      AND scheduled_for >= coalesce($7::timestamptz, '-infinity') AND scheduled_for < coalesce($8::timestamptz,
          'infinity')
      AND ($9::text IS NULL OR job_id IN (SELECT j.id FROM jobs j WHERE j.queue = $9))
    LIMIT $10)
SELECT false AS scan_end, NULL::bigint AS scanned, * FROM hits
UNION ALL
(SELECT true, count(*) OVER (), * FROM scanned ORDER BY id LIMIT 1)
LIMIT $10
"""
RUNS_PAGE_UNHAPPY = """
WITH scanned AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
        finished_at, lease_until, duration_ms, error, skip_reason, created_at, parent_run_id
    FROM runs
    WHERE state IN ('failed', 'skipped', 'cancelled') AND id < $1
      AND scheduled_for >= coalesce($2::timestamptz, '-infinity') AND scheduled_for < coalesce($3::timestamptz,
          'infinity')
    ORDER BY id DESC
    LIMIT $4),
hits AS (
    SELECT * FROM scanned
    WHERE ($5::text[] IS NULL OR state = ANY($5::text[])) AND ($6::text IS NULL OR trigger = $6)
      AND scheduled_for >= coalesce($7::timestamptz, '-infinity') AND scheduled_for < coalesce($8::timestamptz,
          'infinity')
      AND ($9::text IS NULL OR job_id IN (SELECT j.id FROM jobs j WHERE j.queue = $9))
    LIMIT $10)
SELECT false AS scan_end, NULL::bigint AS scanned, * FROM hits
UNION ALL
(SELECT true, count(*) OVER (), * FROM scanned ORDER BY id LIMIT 1)
LIMIT $10
"""
RUNS_PAGE_UNHAPPY_OF_JOB = """
WITH scanned AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
        finished_at, lease_until, duration_ms, error, skip_reason, created_at, parent_run_id
    FROM runs
    WHERE state IN ('failed', 'skipped', 'cancelled') AND job_id = $11 AND id < $1
      AND scheduled_for >= coalesce($2::timestamptz, '-infinity') AND scheduled_for < coalesce($3::timestamptz,
          'infinity')
    ORDER BY job_id, id DESC
    LIMIT $4),
hits AS (
    SELECT * FROM scanned
    WHERE ($5::text[] IS NULL OR state = ANY($5::text[])) AND ($6::text IS NULL OR trigger = $6)
      AND scheduled_for >= coalesce($7::timestamptz, '-infinity') AND scheduled_for < coalesce($8::timestamptz,
          'infinity')
      AND ($9::text IS NULL OR job_id IN (SELECT j.id FROM jobs j WHERE j.queue = $9))
    LIMIT $10)
SELECT false AS scan_end, NULL::bigint AS scanned, * FROM hits
UNION ALL
(SELECT true, count(*) OVER (), * FROM scanned ORDER BY id LIMIT 1)
LIMIT $10
"""
# The facts of a retry by hand (cronos.lifecycle.rerun): run $1, its job's kind, its tick's newest
# attempt and an attempt of the tick still unfinished (looked up by tick identity: its day only).
RERUN_FACTS = """
SELECT r.id, r.job_id, r.scheduled_for, r.attempt, r.state, r.revision, r.parent_run_id, j.kind, now() AS now,
    (SELECT max(t.attempt) FROM runs t WHERE t.job_id = r.job_id AND t.scheduled_for = r.scheduled_for)
        AS newest_attempt,
    (SELECT t.id FROM runs t WHERE t.job_id = r.job_id AND t.scheduled_for = r.scheduled_for
        AND t.state IN ('queued', 'waiting', 'reserved', 'running') ORDER BY t.attempt DESC LIMIT 1)
        AS unfinished_run_id
FROM runs r
JOIN jobs j ON j.id = r.job_id
WHERE r.id = $1
"""
# (none) -> queued (triggered, for an ended run's tick): $1 job, $2 tick, $3 attempt, $4 due,
# $5 revision, $6 parent run; only while no attempt of the tick is unfinished, and once per tick
# identity (a concurrent retry of the same tick gets no row).
RERUN_INSERT = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, parent_run_id)
SELECT $1, $2, $3, 'retry', 'queued', $4, $5, $6
WHERE NOT EXISTS (SELECT 1 FROM runs t WHERE t.job_id = $1 AND t.scheduled_for = $2
    AND t.state IN ('queued', 'waiting', 'reserved', 'running'))
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id
"""

# --- chains (API, cronos.store.chains) -------------------------------------------

# Changes of parents take turns (a transaction-scoped lock): two changes that each close half a
# cycle cannot both pass the check. Only writes that set parents take it.
CHAIN_LOCK = "SELECT pg_advisory_xact_lock(1128808777)"
# The parents named ($1), share-locked against their deletion until this write commits; and
# each one's own parents (the walk towards the roots that finds a cycle).
CHAIN_PARENTS_LOCK = "SELECT id, parents FROM jobs WHERE id = ANY($1::bigint[]) FOR KEY SHARE"
CHAIN_PARENTS_OF = "SELECT id, parents FROM jobs WHERE id = ANY($1::bigint[])"
# Jobs naming $1 as a parent (at most $2), for the refusal of its deletion.
CHAIN_CHILDREN = """
SELECT id, name
FROM jobs
WHERE parents @> ARRAY[$1::bigint] AND parents <> '{}'::bigint[]
ORDER BY id
LIMIT $2
"""
CHAIN_NAMES = "SELECT id, name FROM jobs WHERE id = ANY($1::bigint[])"
# The first shell job among $1's chain descendants (children, their children, ...): a trigger of
# $1 runs them after its success, so it needs the scope a shell job's trigger needs.
CHAIN_SHELL_DESCENDANT = """
WITH RECURSIVE below (id) AS (
    SELECT id FROM jobs WHERE parents @> ARRAY[$1::bigint] AND parents <> '{}'::bigint[]
    UNION
    SELECT j.id FROM jobs j JOIN below b ON j.parents @> ARRAY[b.id] AND j.parents <> '{}'::bigint[]
)
SELECT j.id, j.name FROM jobs j JOIN below USING (id) WHERE j.kind = 'shell' ORDER BY j.id LIMIT 1
"""

# --- job revisions (API) ----------------------------------------------------------

# $1 job id, $2 number, $3 kind, $4 actor, $5 status after it, $6 field names, $7 their new values
# (secrets redacted). Run in the transaction of the change it records.
REVISION_INSERT = """
INSERT INTO job_revisions (job_id, number, kind, actor, status, fields, changes)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING job_id, number, kind, at, actor, status, fields, changes
"""
# A page of a job's revisions ($1 job id, $2 before this number, $3 at most, newest first), each
# object value over $4 bytes summarised (cronos_brief, migration 0041); `size` is the row's size as
# JSON, on which the store ends a page early (cronos.store.db.job_page).
REVISIONS_OF_JOB = """
SELECT page.*, octet_length(to_jsonb(page)::text) AS size
FROM (SELECT job_id, number, kind, at, actor, status, fields, cronos_brief(changes, $4) AS changes
      FROM job_revisions
      WHERE job_id = $1 AND ($2::integer IS NULL OR number < $2)
      ORDER BY number DESC
      LIMIT $3) AS page
ORDER BY number DESC
"""
# One revision whole ($1 job id, $2 number).
REVISION_ONE = """
SELECT job_id, number, kind, at, actor, status, fields, changes
FROM job_revisions
WHERE job_id = $1 AND number = $2
"""
REVISION_JOB_KNOWN = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1) OR EXISTS (SELECT 1 FROM job_revisions WHERE job_id = $1)
"""
# The hand-over: a job's ticks written ahead (due after this transaction's now(), still queued),
# locked in id order like every statement that locks runs. Found by tick identity (the order asks
# for its index: not the job's whole history, nor the queued runs of every job), naming no state.
RUNS_AHEAD_OF_JOB = """
WITH locked AS MATERIALIZED (SELECT id, scheduled_for, trigger, state FROM runs WHERE id = ANY(ARRAY(SELECT id
    FROM runs WHERE job_id = $1 AND scheduled_for > now() AND attempt = 1 ORDER BY job_id, scheduled_for))
    ORDER BY id FOR NO KEY UPDATE)
SELECT id, scheduled_for
FROM locked
WHERE trigger = 'schedule' AND state = 'queued'
ORDER BY id
"""

# --- ledger (dispatcher) ------------------------------------------------------

# Runs are partitioned by scheduled_for (migration 0009). A run looked up by id alone is looked
# for in every partition; so a statement on given ids looks among the unfinished runs only, as
# the partial index runs_unfinished_id does (a day of finished runs costs the lookup nothing),
# and writes the rows it found by id *and* scheduled_for, which leads each write to one
# partition. A queued or running run is always unfinished: every write of an end state sets
# finished_at, and nothing else does. The index names no state, so no statement that picks
# runs by state (the reaper's, the re-push's) can be planned on it.


# The dispatcher's view of a job. $1: ids (DISPATCH_JOBS_BY_ID); paused/deleted ones come back
# paused or not at all, and leave the leader's schedule.
DISPATCH_JOBS_ACTIVE = """
SELECT id, cron_expression, timezone, misfire_policy, misfire_grace_s, jitter_s, concurrency_policy, status,
    coalesce(last_scheduled_for, created_at) AS cursor, revision, plan_revision, run_at, start_at, end_at,
    max_runs - scheduled_runs AS runs_left, catchup_max_per_s, queue, every, anchor,
    CASE WHEN kind = 'task' THEN payload->>'action' END AS action, kind = 'shell' AS shell, name, calendars
FROM jobs
WHERE status = 'active'
"""
DISPATCH_JOBS_BY_ID = """
SELECT id, cron_expression, timezone, misfire_policy, misfire_grace_s, jitter_s, concurrency_policy, status,
    coalesce(last_scheduled_for, created_at) AS cursor, revision, plan_revision, run_at, start_at, end_at,
    max_runs - scheduled_runs AS runs_left, catchup_max_per_s, queue, every, anchor,
    CASE WHEN kind = 'task' THEN payload->>'action' END AS action, kind = 'shell' AS shell, name, calendars
FROM jobs
WHERE id = ANY($1::bigint[])
"""
# The periodic resync (a safety net for lost notifications): what changed since $1 (every API
# write sets updated_at), and a digest of the active set that reveals deletions.
DISPATCH_JOBS_CHANGED = """
SELECT id, cron_expression, timezone, misfire_policy, misfire_grace_s, jitter_s, concurrency_policy, status,
    coalesce(last_scheduled_for, created_at) AS cursor, revision, plan_revision, run_at, start_at, end_at,
    max_runs - scheduled_runs AS runs_left, catchup_max_per_s, queue, every, anchor,
    CASE WHEN kind = 'task' THEN payload->>'action' END AS action, kind = 'shell' AS shell, name, calendars
FROM jobs
WHERE updated_at > $1
"""
DISPATCH_ACTIVE_DIGEST = (
    "SELECT count(*) AS jobs, coalesce(sum(id), 0)::bigint AS id_sum, now() AS now FROM jobs WHERE status = 'active'"
)

# Ticks, ledger first (written: run inside a transaction that holds EPOCH_GUARD), in one
# statement: $1 epoch; $2-$6 one array per tick column ($6: the job revision that planned it).
# Each job's cursor moves to its newest tick here, only forward, and only while the job is active
# and its schedule is still the one that planned the ticks (plan_revision: the fence of a schedule
# change, as the epoch is the leader's); only those jobs get their ticks written (a job paused,
# deleted or given a new schedule meanwhile gets none; one whose cursor is already there was
# written before). An existing tick identity is left alone (RETURNING omits it: nothing is pushed
# twice). Rows are marked pushed by this epoch: the leader's outbox pushes them itself, at once or
# when their (jittered) due time comes. The run's identity and state only: max_runs' count
# (JOBS_COUNT_RUNS) and the end of a job (JOBS_END) follow from what it returns.
# $7: for each tick of a job that holds one pending run at most (cronos.lifecycle.one_pending, NULL
# for the others), the due time from which a run of its job not started yet holds it back: the
# tick, due to run, is written skipped $8 while the job has a run due in [$7, $9) (overdue at the
# leader's round: lifecycle.overdue_before) queued or waiting, written in this epoch (a run a
# leader before wrote ahead and never pushed is overdue by the failover, not by a backlog: G7),
# read in runs_pending_job (the job's own: a range of runs_queued_due_id read every job's, 2 ms a
# tick at 1,000 jobs overloaded).
TICKS_WRITE = """
WITH t AS (
    SELECT * FROM unnest($2::bigint[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::integer[],
                         $7::timestamptz[])
        AS t(job_id, scheduled_for, due_at, skip_reason, revision, held_from)),
held AS (
    SELECT DISTINCT t.job_id FROM t
    WHERE t.held_from IS NOT NULL AND t.skip_reason IS NULL
      AND EXISTS (SELECT 1 FROM runs p WHERE p.job_id = t.job_id AND p.state IN ('queued', 'waiting')
                  AND p.due_at >= t.held_from AND p.due_at < $9 AND p.epoch = $1)),
r AS (
    SELECT t.job_id, t.scheduled_for, t.due_at, t.revision,
           CASE WHEN t.skip_reason IS NULL AND h.job_id IS NOT NULL THEN $8::text ELSE t.skip_reason END AS skip_reason
    FROM t LEFT JOIN held h ON h.job_id = t.job_id),
moved AS (
    UPDATE jobs SET last_scheduled_for = c.cursor
    FROM (SELECT job_id, max(scheduled_for) AS cursor, min(revision) AS revision FROM t GROUP BY job_id) AS c
    WHERE jobs.id = c.job_id AND jobs.status = 'active' AND jobs.plan_revision <= c.revision
      AND (jobs.last_scheduled_for IS NULL OR jobs.last_scheduled_for < c.cursor)
    RETURNING jobs.id)
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, epoch, pushed_epoch, skip_reason, finished_at,
                  revision)
SELECT t.job_id, t.scheduled_for, 1, 'schedule', CASE WHEN t.skip_reason IS NULL THEN 'queued' ELSE 'skipped' END,
       t.due_at, $1::bigint, CASE WHEN t.skip_reason IS NULL THEN $1::bigint END, t.skip_reason,
       CASE WHEN t.skip_reason IS NULL THEN NULL ELSE now() END, t.revision
FROM r t JOIN moved m ON m.id = t.job_id
ON CONFLICT (job_id, scheduled_for, attempt) DO NOTHING
RETURNING id, job_id, floor(extract(epoch FROM scheduled_for) * 1000)::bigint AS scheduled_for_ms,
          floor(extract(epoch FROM due_at) * 1000)::bigint AS due_ms, state, skip_reason
"""
# max_runs: the scheduled runs a tick write queued for jobs $1, $2 of them each (skips do not count).
JOBS_COUNT_RUNS = """
UPDATE jobs SET scheduled_runs = scheduled_runs + c.runs
FROM unnest($1::bigint[], $2::integer[]) AS c(id, runs)
WHERE jobs.id = c.id
"""
# Jobs whose last tick the leader wrote (window over, max_runs reached, one-off done), in the
# tick write's fenced transaction: $1 ids, $2 'completed' or 'expired', $3 the revision that
# planned it. Only an active job whose schedule is still that revision's ends; the end is its
# next revision (kind 'ended'), as a pause is. Returns the ids of the jobs ended.
JOBS_END = """
WITH ended AS (UPDATE jobs SET status = e.status, revision = jobs.revision + 1, updated_at = now()
    FROM unnest($1::bigint[], $2::text[], $3::integer[]) AS e(id, status, revision) WHERE jobs.id = e.id
    AND jobs.status = 'active' AND jobs.plan_revision <= e.revision RETURNING jobs.id, jobs.revision,
    jobs.status)
INSERT INTO job_revisions (job_id, number, kind, actor, status, fields, changes)
SELECT id, revision, 'ended', 'dispatcher', status, ARRAY['status'], jsonb_build_object('status', status)
FROM ended
RETURNING job_id
"""
# --- the outbox (leader, cronos.store.ledger; fenced) --------------------------------------
#
# Every queued run reaches the stream through here: queued, not pushed in this epoch
# (pushed_epoch NULL), due within the push lead. Ticks the leader writes itself are marked pushed
# by its epoch as they are written (TICKS_WRITE) and pushed from its memory; election, Redis
# losing its data and the watchdog only clear the mark (OUTBOX_UNMARK*), and the runs come back here.

# Sent first in an outbox transaction: over partitions, a page in due order must be a merge of
# each partition's index, not a sort of everything due, which the planner picks whenever stale
# statistics promise few queued runs (the whole backlog sorted for every page).
OUTBOX_PLAN = "SET LOCAL enable_sort = off"
# The runs to push: never pushed in this epoch, due by $1, at most $2, in due order, locked (a run
# being claimed right now is left for the next pass), with the facts the misfire rule decides on
# (cronos.lifecycle.stale_tick_runs: the job's policy, grace and cursor, its newest written tick),
# and its job's queue (the stream its token goes to), task action and whether it is a shell job
# (executors route on them).
OUTBOX_TAKE = """
WITH pick AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, due_at FROM runs
    WHERE state = 'queued' AND pushed_epoch IS NULL AND due_at <= $1
    ORDER BY due_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED)
SELECT p.id, p.job_id, p.scheduled_for, p.attempt, p.trigger, p.due_at,
       j.misfire_policy, j.misfire_grace_s, j.last_scheduled_for AS cursor, j.queue,
       CASE WHEN j.kind = 'task' THEN j.payload->>'action' END AS action, j.kind = 'shell' AS shell
FROM pick p JOIN jobs j ON j.id = p.job_id
"""
# queued -> queued, pushed by epoch $1 (pushed): the runs $2 (which OUTBOX_TAKE locked); those of
# $3 (stale ticks their misfire policy keeps) due anew at $4, so no claim or reaper expires them.
OUTBOX_MARK = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs WHERE id = ANY($2::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET pushed_epoch = $1, due_at = CASE WHEN r.id = ANY($3::bigint[]) THEN $4 ELSE r.due_at END
FROM locked l WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'queued'
RETURNING r.id
"""
# When the outbox has work next: the due time of the first queued run not pushed.
OUTBOX_NEXT_DUE = "SELECT min(due_at) FROM runs WHERE state = 'queued' AND pushed_epoch IS NULL"
# queued -> queued, not pushed (unpushed): the next page of queued runs marked pushed, in id
# order after run $1, at most $2 (election, Redis lost its data: Ledger.unmark pages through them
# all). Pages, not one statement over every queued run: with a backlog of 100,000s that statement
# ran for tens of seconds, held the epoch row (an election waits for it) and, locking in scan order,
# deadlocked with claims, so the new leader's term timed out and the next one began it again.
# Read through runs_unfinished_id (OUTBOX_PLAN first); rows locked in id order, like every statement
# that locks runs.
OUTBOX_UNMARK = """
WITH pick AS MATERIALIZED (
    SELECT id, scheduled_for FROM runs
    WHERE finished_at IS NULL AND id > $1 AND state = 'queued' AND pushed_epoch IS NOT NULL
    ORDER BY id LIMIT $2 FOR NO KEY UPDATE)
UPDATE runs r SET pushed_epoch = NULL FROM pick WHERE r.id = pick.id AND r.scheduled_for = pick.scheduled_for
RETURNING r.id
"""
# unpushed, the watchdog's: queued runs whose token went out (pushed_epoch set) and that nobody
# has claimed $1 seconds past due, oldest first, leaving out $2 (run ids it unmarked moments ago)
# and rows being claimed right now (SKIP LOCKED) and runs of jobs in the queues $4 (whose streams
# hold unread tokens: a backlog, not a loss; their jobs' queues are looked up only when $4 names
# one); at most $3. Sent after OUTBOX_PLAN, for the same reason as OUTBOX_TAKE.
OUTBOX_UNMARK_OVERDUE = """
WITH pick AS MATERIALIZED (
    SELECT id, scheduled_for FROM runs
    WHERE state = 'queued' AND pushed_epoch IS NOT NULL AND due_at < now() - make_interval(secs => $1)
      AND NOT (id = ANY($2::bigint[]))
      AND (cardinality($4::text[]) = 0 OR NOT (SELECT j.queue FROM jobs j WHERE j.id = runs.job_id) = ANY($4::text[]))
    ORDER BY due_at, id LIMIT $3 FOR NO KEY UPDATE SKIP LOCKED)
UPDATE runs r SET pushed_epoch = NULL FROM pick WHERE r.id = pick.id AND r.scheduled_for = pick.scheduled_for
RETURNING r.id
"""


# --- runs (executor) ----------------------------------------------------------
#
# Each statement applies one transition of cronos.lifecycle, guarded by its from-state; the
# decisions are made in Python between the facts a statement reads and the one that applies them.
# Run start and finish times are clock_timestamp(), not now() (the transaction's start): a claim
# that had to wait for the previous run's finish must not be stamped before it.

# The facts a claim decides on (cronos.lifecycle.overlap), for the runs $1 with ticks in [$2, $3)
# (NULL: unknown): each run's state, tick and due time, its job's policy, jitter and misfire grace
# (a run claimed past its grace expires instead: lifecycle.expired), the job's running
# exclusive run if any, and, for buffer_one only, whether one of the job's runs waits with an
# earlier tick (probed in runs_waiting_job, by its columns: one entry, whatever the job's history);
# the job's concurrency group (a run of a grouped job also needs a slot: cronos.store.groups) and
# whether the run holds one already; and PostgreSQL's clock. Nothing is locked (a claim holds no
# lock a finish or a heartbeat could wait for): a wait is checked again after it is recorded
# (RUNNING_JOBS_LOCKED, cronos.store.claims).
# The running run is found through runs_running_exclusive (LIMIT 1: a probe per run, which the
# planner cannot flatten into a join that reads every unfinished run; one key
# probe; a lookup by id only when a run of the job is running: the row that table names is running,
# and a state named here would plan the lookup on runs_owned_lease, every running run).
CLAIM_FACTS = """
WITH batch AS MATERIALIZED (
    SELECT id, job_id, state, scheduled_for, attempt, due_at FROM runs
    WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
      AND scheduled_for >= coalesce($2::timestamptz, '-infinity')
        AND scheduled_for < coalesce($3::timestamptz, 'infinity'))
SELECT b.id, b.job_id, b.state, b.scheduled_for, b.attempt, b.due_at,
       j.concurrency_policy AS policy, j.jitter_s, j.misfire_grace_s, clock_timestamp() AS now,
       j.concurrency_group AS grp, CASE WHEN j.concurrency_group IS NOT NULL THEN EXISTS (
           SELECT 1 FROM concurrency_group_slots s WHERE s.run_id = b.id) ELSE false END AS holds_slot,
       o.scheduled_for AS ahead_scheduled_for, o.attempt AS ahead_attempt, o.started_at AS ahead_started_at,
       CASE WHEN j.concurrency_policy = 'buffer_one' THEN (
           SELECT count(*) FROM (SELECT 1 FROM runs w WHERE w.state = 'waiting' AND w.waiting_for IS NULL
             AND (w.job_id, w.scheduled_for, w.attempt) < (b.job_id, b.scheduled_for, b.attempt) AND w.job_id = b.job_id
             ORDER BY w.job_id, w.scheduled_for, w.attempt LIMIT 1) e) ELSE 0 END AS earlier_waiting
FROM batch b JOIN jobs j ON j.id = b.job_id
LEFT JOIN LATERAL (
    SELECT r.id, r.scheduled_for, r.attempt, coalesce(r.started_at, r.due_at) AS started_at FROM runs r
    WHERE r.id = (SELECT x.run_id FROM runs_running_exclusive x WHERE x.job_id = b.job_id)
      AND j.concurrency_policy <> 'allow' AND r.finished_at IS NULL
    LIMIT 1) o ON true
ORDER BY b.id
"""
# queued -> $6: running (claimed at the due instant) or reserved (ahead of it, the push lead), in
# one statement, the runs of $1 whose claim needs no other fact (lifecycle.claims_at_once): still
# queued, within their misfire grace (at least 1 s), the only run of their job in the batch, and
# their job allows overlap or has no run reserved or running, and names no concurrency group (those
# need a slot: CLAIM_FACTS, cronos.store.groups). By node $2 with a lease of $3 seconds (a reserved
# run's from its due time: its executor starts it then without asking while the lease holds,
# lifecycle.startable; its started_at is NULL until then and returned as its due time, its
# lease_until returned); ticks in [$4, $5); each `exclusive` as its job's policy is now (read in
# this statement; a reserved exclusive run holds its job's place in runs_running_exclusive). The
# batch is read by id alone (a state named there would plan the read on a state's partial index:
# every queued run). Locked in id order. The others are decided from CLAIM_FACTS.
# A run of the job claimed concurrently makes the statement violate runs_one_running_exclusive:
# the caller tries again.
CLAIM_FREE = """
WITH batch AS MATERIALIZED (
    SELECT id, job_id, state, scheduled_for, due_at, count(*) OVER (PARTITION BY job_id) AS of_job FROM runs
    WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
      AND scheduled_for >= coalesce($4::timestamptz, '-infinity')
        AND scheduled_for < coalesce($5::timestamptz, 'infinity')),
free AS MATERIALIZED (
    SELECT b.id
    FROM batch b JOIN jobs j ON j.id = b.job_id
    WHERE b.of_job = 1 AND b.state = 'queued' AND j.concurrency_group IS NULL
      AND b.due_at + make_interval(secs => greatest(j.misfire_grace_s, 1)) >= clock_timestamp()
      AND (j.concurrency_policy = 'allow'
           OR NOT EXISTS (SELECT 1 FROM runs_running_exclusive x WHERE x.job_id = b.job_id))),
locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs
    WHERE id = ANY(ARRAY(SELECT f.id FROM free f)) AND finished_at IS NULL
      AND scheduled_for >= coalesce($4::timestamptz, '-infinity')
        AND scheduled_for < coalesce($5::timestamptz, 'infinity')
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = $6::text, exclusive = j.concurrency_policy <> 'allow', node_id = $2,
       started_at = CASE WHEN $6::text = 'running' THEN clock_timestamp() END,
       lease_until = CASE WHEN $6::text = 'running' THEN now() ELSE greatest(now(), r.due_at) END
                     + make_interval(secs => $3)
FROM locked l, jobs j
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'queued' AND j.id = r.job_id
  AND r.scheduled_for >= coalesce($4::timestamptz, '-infinity')
    AND r.scheduled_for < coalesce($5::timestamptz, 'infinity')
RETURNING r.id, r.job_id, r.scheduled_for, r.attempt, r.trigger, r.epoch,
          coalesce(r.started_at, r.due_at) AS started_at, r.due_at, r.exclusive,
          CASE WHEN $6::text = 'reserved' THEN r.lease_until END AS lease_until,
          j.name, j.kind, j.payload, j.timeout_s, j.max_retries, j.retry_backoff_s, j.concurrency_policy,
          j.webhook_secret
"""
# reserved -> running (started): the runs $1 that node $2 still owns, each started at $3 (by its
# executor's estimate of PostgreSQL's clock); ticks in [$4, $5). Sent after the runs started, for
# those that had not ended by then (an ended one's finish records its start).
RUNS_START = """
WITH locked AS MATERIALIZED (
    SELECT id, node_id, state, scheduled_for FROM runs
    WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
      AND scheduled_for >= coalesce($4::timestamptz, '-infinity')
        AND scheduled_for < coalesce($5::timestamptz, 'infinity')
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'running', started_at = c.started_at
FROM locked l, unnest($1::bigint[], $3::timestamptz[]) AS c(id, started_at)
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'reserved' AND l.node_id = $2 AND c.id = l.id
  AND r.scheduled_for >= coalesce($4::timestamptz, '-infinity')
    AND r.scheduled_for < coalesce($5::timestamptz, 'infinity')
RETURNING r.id
"""
# reserved -> queued (unreserved): the runs $1 that node $2 still owns, which it did not start at
# their instant (drained first, or its lease or their grace ran out): any executor claims them now.
RUNS_UNRESERVE = """
WITH locked AS MATERIALIZED (
    SELECT id, node_id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'queued', node_id = NULL, lease_until = NULL
FROM locked l
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'reserved' AND l.node_id = $2
RETURNING r.id
"""
# queued -> running (claimed): the runs $1, each `exclusive` as $2 says (its job's policy now;
# G3's runs_running_exclusive is kept by triggers on that column), by node $3 with a lease of $4
# seconds; ticks in [$5, $6). Locked in id order, like every statement that locks runs (no
# deadlock between a claim, a heartbeat and a finish). A claim that would make a second exclusive
# run of a job running violates runs_one_running_exclusive: the caller reads the facts again.
CLAIM_RUNS = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs
    WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
      AND scheduled_for >= coalesce($5::timestamptz, '-infinity')
        AND scheduled_for < coalesce($6::timestamptz, 'infinity')
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'running', exclusive = c.exclusive, node_id = $3, started_at = clock_timestamp(),
       lease_until = now() + make_interval(secs => $4)
FROM locked l, unnest($1::bigint[], $2::boolean[]) AS c(id, exclusive), jobs j
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'queued' AND c.id = l.id AND j.id = r.job_id
  AND r.scheduled_for >= coalesce($5::timestamptz, '-infinity')
    AND r.scheduled_for < coalesce($6::timestamptz, 'infinity')
RETURNING r.id, r.job_id, r.scheduled_for, r.attempt, r.trigger, r.epoch, r.started_at, r.due_at, r.exclusive,
          j.name, j.kind, j.payload, j.timeout_s, j.max_retries, j.retry_backoff_s, j.concurrency_policy,
          j.webhook_secret
"""
# queued -> waiting (waited): the runs $1; their tokens are acknowledged and their tick locks
# released, and their predecessor's end wakes them (waiting_for NULL: not a group's). Returns their jobs.
RUNS_WAIT = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'waiting', pushed_epoch = NULL, waiting_for = NULL
FROM locked l WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'queued'
RETURNING r.id, r.job_id
"""
# Which of the jobs $1 have a run running now, each job's G3 row locked FOR SHARE: a finish
# of the job that has not committed yet (it deletes that row) is waited for, then not counted.
RUNNING_JOBS_LOCKED = """
SELECT job_id FROM runs_running_exclusive WHERE job_id = ANY($1::bigint[]) ORDER BY job_id FOR SHARE
"""
# waiting -> queued (woken), back in the outbox (pushed_epoch NULL): the runs $1. Returns their jobs.
RUNS_WAKE = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'queued', pushed_epoch = NULL
FROM locked l WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'waiting'
RETURNING r.id, r.job_id
"""
# queued or waiting -> skipped with reason $2 (overlapped, misfired, expired, handed_over): the runs $1.
RUNS_SKIP = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'skipped', skip_reason = $2, finished_at = now()
FROM locked l WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state IN ('queued', 'waiting')
RETURNING r.id, r.job_id
"""
# running -> failed $3 (replaced): job $1's running exclusive runs but $2, only while $2 (the run
# replacing them) is still queued; each one's executor sees the loss at its next heartbeat. $2 is
# locked with them, in id order: a cancel of $2 (which locks it) comes wholly before this or after
# the transaction that claims $2 next, never between the two (a run replaced by nothing).
REPLACE_RUNNING = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs
    WHERE id = ANY(array_append(ARRAY(
            SELECT id FROM runs WHERE job_id = $1 AND state IN ('reserved', 'running') AND exclusive), $2::bigint))
      AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'failed', error = $3, finished_at = clock_timestamp(), lease_until = NULL,
       duration_ms = extract(epoch FROM now() - r.started_at) * 1000
FROM locked l
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.id <> $2 AND l.state IN ('reserved', 'running')
  AND r.exclusive
  AND EXISTS (SELECT 1 FROM locked m WHERE m.id = $2 AND m.state = 'queued')
RETURNING r.id
"""

# Heartbeat for every run in flight on a node: extends the leases it still owns, returns their ids,
# each with who asked to cancel it (run_cancels; NULL: nobody, one probe of a small table per run
# in flight and beat, not per run). [$4, $5): their ticks, or NULL.
EXTEND_LEASES = """
WITH locked AS MATERIALIZED (SELECT id, node_id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[])
    AND finished_at IS NULL AND scheduled_for >= coalesce($4::timestamptz, '-infinity')
    AND scheduled_for < coalesce($5::timestamptz, 'infinity') ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r
SET lease_until = now() + make_interval(secs => $3)
FROM locked l
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND r.scheduled_for >= coalesce($4::timestamptz,
    '-infinity')
  AND r.scheduled_for < coalesce($5::timestamptz, 'infinity')
  AND l.node_id = $2 AND l.state IN ('reserved', 'running')
RETURNING r.id, (SELECT c.requested_by FROM run_cancels c WHERE c.run_id = r.id) AS cancel_by
"""

# running or reserved -> completed | failed (completed, failed, lost): each run of $1 written only
# while the node $2 (its expected owner) still owns it; $3 the end state, $4 error, $5 traceback, $6
# result excerpt, $7 duration (NULL: from started_at), $8 when it started if its start was not
# recorded yet (a reserved run; NULL: not known, as for a lost one); ticks in [$9, $10). Each run is looked up by its id
# (LATERAL: no plan can scan the runs to join them with the batch), in the order of $1, which the
# caller sorts (locks in id order). The run's identity and state only: its follow-ups (the retry,
# chain runs, waking the run waiting behind it) are the caller's, in the same transaction.
FINISH_RUNS = """
WITH u AS MATERIALIZED (
    SELECT u.*, r.node_id AS owner, r.state AS current, r.scheduled_for AS tick
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],
                $8::timestamptz[]) AS u(id, node_id, state, error, traceback, result, duration_ms, started_at),
    LATERAL (SELECT node_id, state, scheduled_for FROM runs r
             WHERE r.id = u.id AND r.finished_at IS NULL
               AND r.scheduled_for >= coalesce($9::timestamptz, '-infinity')
                 AND r.scheduled_for < coalesce($10::timestamptz, 'infinity')
             FOR NO KEY UPDATE) r)
UPDATE runs r SET state = u.state, finished_at = clock_timestamp(), lease_until = NULL, error = u.error,
       traceback = u.traceback, result = u.result, started_at = coalesce(r.started_at, u.started_at),
       duration_ms = coalesce(u.duration_ms, extract(epoch FROM now() - r.started_at) * 1000)
FROM u
WHERE r.id = u.id AND r.scheduled_for = u.tick AND u.current IN ('reserved', 'running') AND u.owner = u.node_id
  AND r.scheduled_for >= coalesce($9::timestamptz, '-infinity')
    AND r.scheduled_for < coalesce($10::timestamptz, 'infinity')
RETURNING r.id, r.job_id, r.scheduled_for, r.attempt, r.state, r.exclusive, r.started_at, r.finished_at,
          r.revision, r.parent_run_id
"""
# The facts a finish's follow-ups are decided on (cronos.lifecycle), read after FINISH_RUNS in its
# transaction (so they see every wait committed before the finish could end its run):
# kind 'child': (parent job, child job, child revision) for each active job naming one of $1
# (the jobs of the completed runs) as a parent. Only jobs with parents are in jobs_parents, so
# without chains this costs nothing.
# kind 'waiter': the first $3 waiting runs of each of the jobs $2 (whose exclusive runs ended),
# in tick order, with their job's policy and jitter, while no run of that job is running.
FOLLOW_UP_FACTS = """
SELECT 'child' AS kind, p.parent AS job_id, c.id AS child_id, c.revision AS child_revision,
       NULL::bigint AS run_id, NULL::timestamptz AS scheduled_for, NULL::integer AS attempt,
       NULL::timestamptz AS due_at, NULL::text AS policy, NULL::float8 AS jitter_s
FROM jobs c, unnest(c.parents) AS p(parent)
WHERE c.parents && $1::bigint[] AND c.parents <> '{}'::bigint[] AND c.status = 'active' AND p.parent = ANY($1::bigint[])
UNION ALL
SELECT 'waiter', f.job_id, NULL, NULL, w.id, w.scheduled_for, w.attempt, w.due_at, j.concurrency_policy, j.jitter_s
FROM unnest($2::bigint[]) AS f(job_id)
JOIN jobs j ON j.id = f.job_id
CROSS JOIN LATERAL (
    SELECT id, scheduled_for, attempt, due_at FROM runs
    WHERE job_id = f.job_id AND state = 'waiting' AND waiting_for IS NULL
    ORDER BY job_id, scheduled_for, attempt LIMIT $3) w
WHERE NOT EXISTS (SELECT 1 FROM runs_running_exclusive x WHERE x.job_id = f.job_id)
"""
# New queued runs (retried, chained, and the API's triggered): one per row of the arrays $1 job,
# $2 tick, $3 attempt, $4 trigger, $5 due_at, $6 revision, $7 parent run. A tick identity already
# taken is left alone (RETURNING omits it: the caller tells a chain run's tick collision from a
# repeat). Never pushed: the outbox takes them when due.
RUNS_QUEUE = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, parent_run_id)
SELECT u.job_id, u.tick, u.attempt, u.trigger, 'queued', u.due_at, u.revision, u.parent_run_id
FROM unnest($1::bigint[], $2::timestamptz[], $3::integer[], $4::text[], $5::timestamptz[], $6::integer[], $7::bigint[])
     AS u(job_id, tick, attempt, trigger, due_at, revision, parent_run_id)
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for, attempt, trigger, parent_run_id
"""

# The backlog: queued runs more than $1 seconds past due, counted up to $2 (the count reads at
# most that many index entries).
RUNS_OVERDUE = """
SELECT count(*)
FROM (SELECT 1 FROM runs WHERE state = 'queued'
    AND due_at < now() - make_interval(secs => $1) LIMIT $2) AS overdue
"""

# Reaper (leader, fenced by EPOCH_GUARD): runs whose lease expired, with who asked to cancel each
# (cronos.lifecycle.lost) and whether each holds a slot of its job's concurrency group (its end frees it).
LOST_RUNS = """
SELECT r.id, r.node_id, r.scheduled_for, r.attempt, j.kind, j.max_retries, j.retry_backoff_s,
       (SELECT c.requested_by FROM run_cancels c WHERE c.run_id = r.id) AS cancel_by,
       j.concurrency_group IS NOT NULL AND EXISTS (SELECT 1 FROM concurrency_group_slots s WHERE s.run_id = r.id)
           AS holds_slot
FROM runs r
JOIN jobs j ON j.id = r.job_id
WHERE r.state IN ('reserved', 'running') AND r.lease_until < now()
ORDER BY r.lease_until
LIMIT $1 FOR
UPDATE OF r SKIP LOCKED
"""
# The leader's sweep of waiting runs (cronos.store.waiters): at most $1 of them, by job in tick
# order, each with how many of its job's runs wait before it, its job's policy and jitter, and the
# job's running exclusive run if any; and PostgreSQL's clock.
WAITERS_SWEEP = """
SELECT w.id AS run_id, w.job_id, w.scheduled_for, w.attempt, w.due_at, w.earlier,
       j.concurrency_policy AS policy, j.jitter_s, clock_timestamp() AS now,
       o.scheduled_for AS ahead_scheduled_for, o.attempt AS ahead_attempt, o.started_at AS ahead_started_at
FROM (SELECT id, job_id, scheduled_for, attempt, due_at,
             row_number() OVER (PARTITION BY job_id ORDER BY scheduled_for, attempt) - 1 AS earlier
      FROM runs WHERE state = 'waiting' AND waiting_for IS NULL ORDER BY job_id, scheduled_for, attempt LIMIT $1) w
JOIN jobs j ON j.id = w.job_id
LEFT JOIN LATERAL (
    SELECT r.scheduled_for, r.attempt, coalesce(r.started_at, r.due_at) AS started_at FROM runs r
    WHERE r.id = (SELECT x.run_id FROM runs_running_exclusive x WHERE x.job_id = w.job_id)
      AND r.finished_at IS NULL
    LIMIT 1) o ON true
ORDER BY w.job_id, w.scheduled_for, w.attempt
"""
# queued or waiting -> skipped $2 (expired): runs still pending past their job's misfire grace (at least 1 s),
# $1 at most, oldest first. The queued ones' index range is bounded by the smallest grace of any
# job, so runs still within every grace (a backlog being worked off) are not read each time; each
# job's grace is looked up per run (a subquery, not a join) so the scan follows the due_at index
# and stops at the limit. Waiting runs are few (one job's backlog behind its running run).
EXPIRE_PENDING = """
WITH queued AS MATERIALIZED (
    SELECT q.id, q.scheduled_for FROM runs q
    WHERE q.state = 'queued'
      AND q.due_at < now() - make_interval(secs => (SELECT greatest(coalesce(min(misfire_grace_s), 0), 1) FROM jobs))
      AND q.due_at + make_interval(secs => (SELECT greatest(j.misfire_grace_s, 1) FROM jobs j WHERE j.id = q.job_id))
          < now()
    ORDER BY q.due_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED),
waiting AS MATERIALIZED (
    SELECT w.id, w.scheduled_for FROM runs w
    WHERE w.state = 'waiting'
      AND w.due_at + make_interval(secs => (SELECT greatest(j.misfire_grace_s, 1) FROM jobs j WHERE j.id = w.job_id))
          < now()
    ORDER BY w.due_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED)
UPDATE runs r SET state = 'skipped', skip_reason = $2, finished_at = now()
FROM (SELECT * FROM queued UNION ALL SELECT * FROM waiting) e
WHERE r.id = e.id AND r.scheduled_for = e.scheduled_for
RETURNING r.id, r.job_id
"""


# --- runs partitions (leader, cronos.store.partitions) -------------------------

# `runs` is partitioned by scheduled_for, a partition per UTC day (migration 0009), plus the one
# the migration made of the table before it (everything until a midnight) and a default one.
# Each partition's bounds, read back from its bound expression: lower NULL for MINVALUE,
# both NULL for the default partition.
PARTITIONS = r"""
SELECT c.relname AS name, b.expr = 'DEFAULT' AS is_default, substring(b.expr
    FROM 'FROM \(''([^'']+)''\)')::timestamptz AS lower, substring(b.expr
    FROM 'TO \(''([^'']+)''\)')::timestamptz AS upper
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid, LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) b
WHERE i.inhparent = 'runs'::regclass
ORDER BY upper NULLS LAST
"""
# DDL waits this long for a lock, then gives up until the next pass: while it waits, the
# statements behind it in the lock queue (claims, finishes) wait too.
PARTITION_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '500ms'"
# A new day, {name} from [{lower}, {upper}): built apart (no lock on runs while it is empty),
# handed the rows of its day that waited in the default partition, then attached. Attaching
# takes a SHARE UPDATE EXCLUSIVE lock on runs (claims and finishes go on), but an exclusive one
# on the default partition (scanned for rows of the day) and, for the foreign key, a SHARE ROW
# EXCLUSIVE one on jobs: the leader's cursor updates and API job writes wait for it.
PARTITION_BUILD = 'CREATE TABLE "{name}" (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
PARTITION_TAKE_DEFAULT = """
WITH moved AS (DELETE FROM runs_default WHERE scheduled_for >= $1 AND scheduled_for < $2 RETURNING *)
INSERT INTO "{name}"
SELECT *
FROM moved
"""
PARTITION_ATTACH = "ALTER TABLE runs ATTACH PARTITION \"{name}\" FOR VALUES FROM ('{lower}') TO ('{upper}')"
# Moving a running (or reserved) exclusive run out of the default partition ended its G3 row (a
# delete from runs); it is still running in its new partition.
PARTITION_RUNNING_EXCLUSIVE = """
INSERT INTO runs_running_exclusive (job_id, run_id)
SELECT job_id, id
FROM "{name}"
WHERE state IN ('reserved', 'running') AND exclusive
ON CONFLICT DO NOTHING
"""
# A partition to drop must hold no run still to run or running (its partial indexes answer).
PARTITION_BUSY = "SELECT EXISTS (SELECT 1 FROM \"{name}\" WHERE state IN ('queued', 'waiting', 'reserved', 'running'))"
PARTITION_DETACH = 'ALTER TABLE runs DETACH PARTITION "{name}"'
PARTITION_DROP = 'DROP TABLE "{name}"'
# The default partition's rows past retention (never a queued or running one), $2 at a time.
DEFAULT_PURGE = """
DELETE
FROM runs_default
WHERE id IN (SELECT id FROM runs_default WHERE scheduled_for < $1 AND state NOT IN ('queued', 'waiting',
    'reserved', 'running') LIMIT $2)
"""


# --- reconciliation auditor (dispatcher/auditor.py) ----------------------------

# The jobs whose definition held through the window ($1, $2]: created before its end, with no change
# of theirs (pause, resume, edit) since its start (job_revisions_job_at) — an edit moves ticks, and
# a window it cut through is left out rather than guessed. Active ones, and those the leader ended
# since its start (their last revision is its `ended`; their cursor is their last tick): windowed,
# max_runs and one-off jobs too. Grouped by what their ticks in the window depend on (their schedule
# and window, the end the leader gave them, and since when they count: the window's start, or their
# creation within it; a one-off's just before its run_at): a million jobs on 85,000 schedules are
# 85,000 rows, each schedule's fire times computed once, and only the jobs that had a tick looked up.
AUDIT_SCHEDULES = """
SELECT j.cron_expression, j.timezone, j.run_at, j.start_at, j.end_at, j.every, j.anchor,
    CASE WHEN j.status = 'active' THEN NULL ELSE j.last_scheduled_for END AS ended_after,
    greatest($1, CASE WHEN j.run_at IS NULL THEN j.created_at
                      ELSE least(j.created_at, j.run_at - interval '1 microsecond') END) AS after,
    array_agg(j.id) AS ids
FROM jobs j
WHERE j.created_at < $2
  AND (j.status = 'active' OR (j.status IN ('completed', 'expired') AND j.updated_at >= $1
       AND EXISTS (SELECT 1 FROM job_revisions e WHERE e.job_id = j.id AND e.number = j.revision AND e.kind = 'ended')))
  AND NOT EXISTS (SELECT 1 FROM job_revisions r WHERE r.job_id = j.id AND r.at >= $1 AND r.number > 1
                  AND r.kind <> 'ended')
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
"""
# What blackouts select jobs by (cronos.rules): of the jobs $1.
AUDIT_JOB_NAMES = "SELECT id, name, queue, calendars FROM jobs WHERE id = ANY($1::bigint[])"
# Their scheduled ticks in ($2, $3] that the ledger holds (any state), first attempts, with
# the start delay of those that started.
AUDIT_TICKS = """
SELECT job_id, scheduled_for, extract(epoch FROM started_at - scheduled_for)::float8 AS start_delay_s
FROM runs
WHERE job_id = ANY($1::bigint[]) AND scheduled_for > $2 AND scheduled_for <= $3
  AND attempt = 1 AND trigger = 'schedule'
"""


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


# --- leader epoch -------------------------------------------------------------

# Held FOR SHARE by every fenced write: an election (which updates the row) waits for the
# write to commit, and a write after an election sees the new epoch and does nothing.
EPOCH_GUARD = "SELECT epoch FROM leader_epoch WHERE id = 1 FOR SHARE"
EPOCH_TAKE = """
UPDATE leader_epoch
SET epoch = epoch + 1, holder = $1, elected_at = now()
WHERE id = 1
RETURNING epoch, elected_at
"""
EPOCH_LOG = "INSERT INTO leader_log (epoch, holder, elected_at) VALUES ($1, $2, $3)"
EPOCH_CURRENT = "SELECT epoch, holder, elected_at FROM leader_epoch WHERE id = 1"

# --- API tokens ----------------------------------------------------------------


# $1 name, $2 SHA-256 of the token, $3 scopes, $4 expires_at or NULL. A live token of the
# same name makes it a unique violation.
TOKEN_INSERT = """
INSERT INTO api_tokens (name, token_hash, scopes, expires_at)
VALUES ($1, $2, $3, $4)
RETURNING id, name, scopes, created_at, last_used_at, expires_at, revoked_at
"""
# Authentication: $1 SHA-256 of the presented token. The caller compares the hash again in
# constant time and reads revoked_at / expires_at itself (to say why a token is refused).
TOKEN_BY_HASH = """
SELECT id, name, scopes, created_at, last_used_at, expires_at, revoked_at, token_hash, now() AS now
FROM api_tokens
WHERE token_hash = $1
"""
# last_used_at moves at most once a minute per token: not a write per request.
TOKEN_TOUCH = """
UPDATE api_tokens
SET last_used_at = now()
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
"""
# Protected mode ends when any token can be used.
TOKEN_USABLE_EXISTS = """
SELECT EXISTS (SELECT 1 FROM api_tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))
"""
# Loopback clients may act as admin: protected mode was never closed (or was reopened by the
# operator) and no token can be used. A missing row (no migration 0020 yet) counts as closed.
TOKEN_LOCAL_ADMIN_OPEN = """
SELECT coalesce((SELECT NOT closed FROM api_protected_mode), false)
   AND NOT EXISTS (SELECT 1 FROM api_tokens
                   WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))
"""
# Run in the transaction that creates a token: protected mode never comes back by itself.
PROTECTED_MODE_CLOSE = "UPDATE api_protected_mode SET closed = true, changed_at = now() WHERE NOT closed"
# Taken first by the reopen, so a token created meanwhile is seen by its check (or closes after it).
PROTECTED_MODE_LOCK = "SELECT closed FROM api_protected_mode FOR UPDATE"
# The operator's `cronos token reopen-local`: true when it was closed.
PROTECTED_MODE_REOPEN = """
UPDATE api_protected_mode SET closed = false, changed_at = now() WHERE closed RETURNING true
"""
TOKEN_LIST = """
SELECT id, name, scopes, created_at, last_used_at, expires_at, revoked_at
FROM api_tokens
WHERE revoked_at IS NULL
ORDER BY name
"""
TOKEN_REVOKE = """
UPDATE api_tokens
SET revoked_at = now()
WHERE name = $1 AND revoked_at IS NULL
RETURNING id, name, scopes, created_at, last_used_at, expires_at, revoked_at
"""

# --- audit trail ---------------------------------------------------------------


# $1 actor, $2 subject ('job' | 'token'), $3 action, $4 job id, $5 token name, $6 before,
# $7 after, $8 detail (jsonb or NULL each). Run in the transaction of the change it records.
AUDIT_INSERT = """
INSERT INTO audit_log (actor, subject, action, job_id, token_name, before, after, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
"""
# Newest first. $1 job id, $2 last id seen or NULL, $3 limit.
# $4: the value bound of the list views (cronos_brief, as REVISIONS_OF_JOB).
AUDIT_OF_JOB = """
SELECT page.*, octet_length(to_jsonb(page)::text) AS size
FROM (SELECT id, at, actor, subject, action, job_id, token_name, cronos_brief(before, $4) AS before,
             cronos_brief(after, $4) AS after, cronos_brief(detail, $4) AS detail
      FROM audit_log
      WHERE job_id = $1 AND ($2::bigint IS NULL OR id < $2)
      ORDER BY id DESC
      LIMIT $3) AS page
ORDER BY id DESC
"""
AUDIT_JOB_KNOWN = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1) OR EXISTS (SELECT 1 FROM audit_log WHERE job_id = $1)
"""
# Newest first. $1 subject, $2 last id seen or NULL, $3 limit.
AUDIT_OF_SUBJECT = """
SELECT id, at, actor, subject, action, job_id, token_name, before, after, detail
FROM audit_log
WHERE subject = $1 AND ($2::bigint IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3
"""

# --- console (API, read only) ---------------------------------------------------------

# The jobs page of the console: a page of jobs by id, each with its last started-or-ended run
# and its success over its last finished runs, both among its newest runs (the recent runs'
# bound): each lateral read walks at most that many entries of runs_job_newest (job_id, id DESC),
# so a page costs the same with 10,000 jobs and millions of runs, whatever their states. Five
# statements, one per filter, so that no plan (a prepared statement's generic one included) walks
# every job for a filter that matches few (a million jobs: a status none has took 1.7 s).
# No filter: $1 last id seen (0 first), $2 page size, $3 finished runs the rate is over, $4 the
# recent runs' bound.
JOB_OVERVIEW = """
WITH page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor FROM jobs
    WHERE id > $1 ORDER BY id LIMIT $2)
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor,
    l.id AS run_id, l.state AS run_state,
    l.scheduled_for AS run_scheduled_for, l.due_at AS run_due_at, l.started_at AS run_started_at,
    l.duration_ms AS run_duration_ms, s.completed, s.finished
FROM page p
LEFT
JOIN LATERAL (SELECT * FROM (SELECT id, state, scheduled_for, due_at, started_at, duration_ms  FROM runs
    WHERE job_id = p.id ORDER BY id DESC LIMIT $4) recent  WHERE state <> 'queued'
    ORDER BY id DESC LIMIT 1) l ON true
LEFT
JOIN LATERAL (SELECT count(*) FILTER (WHERE state = 'completed') AS completed, count(*) AS finished
    FROM (SELECT state FROM (SELECT id, state FROM runs WHERE job_id = p.id ORDER BY id DESC LIMIT $4) recent
    WHERE state IN ('completed', 'failed') ORDER BY id DESC LIMIT $3) f) s ON true
ORDER BY p.id
"""
# A status ($1) only, through jobs_status_id (status, id) (PAGE_PLAN first): $2 last id seen, $3 page
# size, $4 rate, $5 bound.
JOB_OVERVIEW_STATUS = """
WITH page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor FROM jobs
    WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3)
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor,
    l.id AS run_id, l.state AS run_state,
    l.scheduled_for AS run_scheduled_for, l.due_at AS run_due_at, l.started_at AS run_started_at,
    l.duration_ms AS run_duration_ms, s.completed, s.finished
FROM page p
LEFT
JOIN LATERAL (SELECT * FROM (SELECT id, state, scheduled_for, due_at, started_at, duration_ms  FROM runs
    WHERE job_id = p.id ORDER BY id DESC LIMIT $5) recent  WHERE state <> 'queued'
    ORDER BY id DESC LIMIT 1) l ON true
LEFT
JOIN LATERAL (SELECT count(*) FILTER (WHERE state = 'completed') AS completed, count(*) AS finished
    FROM (SELECT state FROM (SELECT id, state FROM runs WHERE job_id = p.id ORDER BY id DESC LIMIT $5) recent
    WHERE state IN ('completed', 'failed') ORDER BY id DESC LIMIT $4) f) s ON true
ORDER BY p.id
"""
# A name search or a selector (a filtered page: JOB_LIST_SELECTED's comment): $1 status or NULL,
# $2 ILIKE pattern on the name or NULL (escaped by the caller), $3 last id seen, $4 page size, $5 rate,
# $6 bound, $7 a selector's jsonpath or NULL, $8 the slice. Its first row says how many jobs the
# slice read and the last one's id (a row without an id: none matched); the page goes on through
# JOB_OVERVIEW_SEARCHED (a name search: the trigram index jobs_name_trgm, migration 0039) or
# JOB_OVERVIEW_SELECTED (a selector: jobs_labels), whose matches are read whole, then cut at the
# cursor (as JOB_LIST_SELECTED_INDEXED's).
JOB_OVERVIEW_FILTERED = """
WITH slice AS MATERIALIZED (SELECT id, status, name, labels FROM jobs WHERE id > $3 ORDER BY id LIMIT $8),
    page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor FROM jobs
    WHERE id IN (SELECT id FROM slice WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR name ILIKE $2)
        AND ($7::jsonpath IS NULL OR labels @@ $7::jsonpath) ORDER BY id LIMIT $4))
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor,
    l.id AS run_id, l.state AS run_state,
    l.scheduled_for AS run_scheduled_for, l.due_at AS run_due_at, l.started_at AS run_started_at,
    l.duration_ms AS run_duration_ms, s.completed, s.finished, c.scanned, c.scanned_to
FROM (SELECT count(*) AS scanned, max(id) AS scanned_to FROM slice) c
LEFT JOIN page p ON true
LEFT
JOIN LATERAL (SELECT * FROM (SELECT id, state, scheduled_for, due_at, started_at, duration_ms  FROM runs
    WHERE job_id = p.id ORDER BY id DESC LIMIT $6) recent  WHERE state <> 'queued'
    ORDER BY id DESC LIMIT 1) l ON true
LEFT
JOIN LATERAL (SELECT count(*) FILTER (WHERE state = 'completed') AS completed, count(*) AS finished
    FROM (SELECT state FROM (SELECT id, state FROM runs WHERE job_id = p.id ORDER BY id DESC LIMIT $6) recent
    WHERE state IN ('completed', 'failed') ORDER BY id DESC LIMIT $5) f) s ON true
ORDER BY p.id
"""
# The rest of a name search's page: JOB_OVERVIEW_FILTERED's parameters but the slice. Planned for its
# pattern each time (PAGE_PLAN first): a generic plan, blind to the pattern's trigrams, may read the
# table instead of the index.
JOB_OVERVIEW_SEARCHED = """
WITH hits AS MATERIALIZED (SELECT id FROM jobs WHERE name ILIKE $2 AND ($1::text IS NULL OR status = $1)
    AND ($7::jsonpath IS NULL OR labels @@ $7::jsonpath)),
    page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor FROM jobs
    WHERE id IN (SELECT id FROM hits WHERE id > $3 ORDER BY id LIMIT $4))
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor,
    l.id AS run_id, l.state AS run_state,
    l.scheduled_for AS run_scheduled_for, l.due_at AS run_due_at, l.started_at AS run_started_at,
    l.duration_ms AS run_duration_ms, s.completed, s.finished
FROM page p
LEFT
JOIN LATERAL (SELECT * FROM (SELECT id, state, scheduled_for, due_at, started_at, duration_ms  FROM runs
    WHERE job_id = p.id ORDER BY id DESC LIMIT $6) recent  WHERE state <> 'queued'
    ORDER BY id DESC LIMIT 1) l ON true
LEFT
JOIN LATERAL (SELECT count(*) FILTER (WHERE state = 'completed') AS completed, count(*) AS finished
    FROM (SELECT state FROM (SELECT id, state FROM runs WHERE job_id = p.id ORDER BY id DESC LIMIT $6) recent
    WHERE state IN ('completed', 'failed') ORDER BY id DESC LIMIT $5) f) s ON true
ORDER BY p.id
"""
# The rest of a selector's page (no name search): $1 status or NULL, $2 last id seen, $3 page size,
# $4 rate, $5 bound, $6 the selector.
JOB_OVERVIEW_SELECTED = """
WITH hits AS MATERIALIZED (SELECT id FROM jobs WHERE labels @@ $6::jsonpath AND ($1::text IS NULL OR status = $1)),
    page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor FROM jobs
    WHERE id IN (SELECT id FROM hits WHERE id > $2 ORDER BY id LIMIT $3))
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor,
    l.id AS run_id, l.state AS run_state,
    l.scheduled_for AS run_scheduled_for, l.due_at AS run_due_at, l.started_at AS run_started_at,
    l.duration_ms AS run_duration_ms, s.completed, s.finished
FROM page p
LEFT
JOIN LATERAL (SELECT * FROM (SELECT id, state, scheduled_for, due_at, started_at, duration_ms  FROM runs
    WHERE job_id = p.id ORDER BY id DESC LIMIT $5) recent  WHERE state <> 'queued'
    ORDER BY id DESC LIMIT 1) l ON true
LEFT
JOIN LATERAL (SELECT count(*) FILTER (WHERE state = 'completed') AS completed, count(*) AS finished
    FROM (SELECT state FROM (SELECT id, state FROM runs WHERE job_id = p.id ORDER BY id DESC LIMIT $5) recent
    WHERE state IN ('completed', 'failed') ORDER BY id DESC LIMIT $4) f) s ON true
ORDER BY p.id
"""

# --- tick accountability (API, read only; cronos.store.ticks) ----------------------------------

# The revisions a ticks window ($2, $3] needs, oldest first, without their payloads: the creation
# (number 1: the ticks before it), the one in force at the window's start (the newest at or before
# $2) and those within the window, at most $4 of these. `changes` holds only the schedule fields
# the revision set (read only from a revision that set one: a payload is never detoasted for the
# rest); the one in force at the start gets its fields from TICK_SCHEDULE_AT. The window's rows and
# the one before it are found through job_revisions_job_at. $1 job id. The name is one of them: it
# picks the values of an `H` (cronos.hashed).
TICK_REVISIONS = """
SELECT job_id, number, kind, at, actor, status, fields,
    CASE WHEN fields && ARRAY['cron_expression', 'timezone', 'every', 'anchor', 'name']
        THEN (SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb) FROM jsonb_each(changes)
              WHERE key IN ('cron_expression', 'timezone', 'every', 'anchor', 'name'))
        ELSE '{}'::jsonb END AS changes
FROM job_revisions
WHERE job_id = $1 AND (number = 1
    OR number = (SELECT number FROM job_revisions WHERE job_id = $1 AND at <= $2 ORDER BY at DESC, number DESC LIMIT 1)
    OR number = ANY(ARRAY(SELECT number FROM job_revisions WHERE job_id = $1 AND at > $2 AND at <= $3
                          ORDER BY at, number LIMIT $4)))
ORDER BY number
"""
# The job's schedule as revision $2 left it, as one object: the newest value of each schedule field
# set at or before it (absent when none set it), each found through its own partial index. $1 job id.
TICK_SCHEDULE_AT = """
SELECT coalesce((SELECT jsonb_build_object('cron_expression', changes -> 'cron_expression') FROM job_revisions
                 WHERE job_id = $1 AND number <= $2 AND 'cron_expression' = ANY(fields)
                 ORDER BY number DESC LIMIT 1), '{}'::jsonb)
    || coalesce((SELECT jsonb_build_object('timezone', changes -> 'timezone') FROM job_revisions
                 WHERE job_id = $1 AND number <= $2 AND 'timezone' = ANY(fields)
                 ORDER BY number DESC LIMIT 1), '{}'::jsonb)
    || coalesce((SELECT jsonb_build_object('every', changes -> 'every') FROM job_revisions
                 WHERE job_id = $1 AND number <= $2 AND 'every' = ANY(fields)
                 ORDER BY number DESC LIMIT 1), '{}'::jsonb)
    || coalesce((SELECT jsonb_build_object('anchor', changes -> 'anchor') FROM job_revisions
                 WHERE job_id = $1 AND number <= $2 AND 'anchor' = ANY(fields)
                 ORDER BY number DESC LIMIT 1), '{}'::jsonb)
    || coalesce((SELECT jsonb_build_object('name', changes -> 'name') FROM job_revisions
                 WHERE job_id = $1 AND number <= $2 AND 'name' = ANY(fields)
                 ORDER BY number DESC LIMIT 1), '{}'::jsonb)
"""
# How far the ledger is written for the job (its cursor); no row: the job was deleted.
TICK_CURSOR = "SELECT last_scheduled_for FROM jobs WHERE id = $1"
# The ledger's rows of the job's ticks in ($2, $3]: scheduled runs and their retries (a manual or chain
# run is no tick). The bounds on scheduled_for prune the day partitions and walk the
# (job_id, scheduled_for, attempt) unique index.
TICK_RUNS = """
SELECT id, scheduled_for, attempt, trigger, revision, state, started_at, skip_reason, due_at, waiting_for
FROM runs
WHERE job_id = $1 AND scheduled_for > $2 AND scheduled_for <= $3
  AND trigger IN ('schedule', 'retry', 'backfill')
ORDER BY scheduled_for, attempt
"""

# --- cluster identity ---------------------------------------------------------

# The id migration 0024 made once (cronos/store/identity.py).
CLUSTER_IDENTITY = "SELECT id::text FROM cluster_identity"

# --- run inputs (API, executor; cronos.inputs, cronos.store.inputs) -----------------------------

# The job as a trigger with inputs checks them: its row share-locked (FOR KEY SHARE: a concurrent
# change of the job waits until the run is queued; the leader's cursor writes do not).
JOB_GET_KEY_SHARE = """
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group
FROM jobs
WHERE id = $1 FOR KEY SHARE
"""
# Re-runs of job $1's ticks take turns (a transaction-scoped lock in its own two-key space): two
# re-runs of one tick would otherwise both see it ended and queue attempts whose retries collide.
RERUN_LOCK = "SELECT pg_advisory_xact_lock(1381322574, ($1::bigint % 2147483647)::integer)"
# A caller's backfills, one at a time (cronos.store.backfill): its count of active ones holds
# until the transaction that may add one commits. $1 the actor (a token's name).
BACKFILL_CALLER_LOCK = "SELECT pg_advisory_xact_lock(1113678918, hashtext($1))"
# The backfills still releasing runs (their last run due after $3) of job $1 and of actor $2,
# from their audit entries through the job's index and the actors' (0040_backfill_actor).
BACKFILLS_ACTIVE = """
SELECT count(*) FILTER (WHERE job_id = $1) AS of_job, count(*) FILTER (WHERE actor = $2) AS of_caller
FROM audit_log
WHERE action = 'backfilled' AND (job_id = $1 OR actor = $2) AND (detail->>'until')::timestamptz > $3
"""
# What a re-run of job $1's tick $2 is decided on (cronos.inputs.rerun_attempt): its highest
# attempt (NULL: no run) and its runs that have not ended. One statement, one snapshot: a finish
# that queues a retry commits both or neither.
TICK_RERUN_FACTS = """
SELECT max(attempt) AS last, coalesce(array_agg(id ORDER BY id) FILTER (WHERE finished_at IS NULL), '{}') AS unfinished
FROM runs
WHERE job_id = $1 AND scheduled_for = $2
"""
# A re-run of job $1's tick $2 as attempt $3: queued, due now, even for a paused job. No row: the
# job is missing, or the attempt was taken meanwhile.
RUN_INSERT_RERUN = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision)
SELECT id, $2, $3, 'manual', 'queued', now(), revision
FROM jobs
WHERE id = $1
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id
"""
# $1 job, $2 tick, $3 attempt, $4 run, $5 job kind, $6 overrides (NULL: none), $7 actor.
RUN_INPUTS_INSERT = """
INSERT INTO run_inputs (job_id, scheduled_for, attempt, run_id, kind, payload, actor)
VALUES ($1, $2, $3, $4, $5, $6, $7)
"""
# The inputs of the runs $1 (job $2, tick $3, attempt $4 each): the newest row of each one's tick at
# or before its attempt (payload NULL: a re-run without overrides). Only manual runs and retries are
# asked about (cronos.inputs.INPUT_TRIGGERS); one primary-key probe each.
RUN_INPUTS_OF = """
SELECT c.id, i.kind, i.payload
FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::integer[]) AS c(id, job_id, tick, attempt)
CROSS JOIN LATERAL (
    SELECT kind, payload FROM run_inputs
    WHERE job_id = c.job_id AND scheduled_for = c.tick AND attempt <= c.attempt
    ORDER BY job_id, scheduled_for, attempt DESC LIMIT 1) i
WHERE i.payload IS NOT NULL
"""
# Retention (cronos.store.partitions.purge_default, fenced): the inputs of runs whose tick and whose
# trigger are both older than $1 (their runs and retries went with their days; a re-run of a tick
# past retention is refused), at most $2.
RUN_INPUTS_PURGE = """
DELETE FROM run_inputs
WHERE (job_id, scheduled_for, attempt) IN (SELECT job_id, scheduled_for, attempt FROM run_inputs
    WHERE scheduled_for < $1 AND created_at < $1 LIMIT $2)
"""

# --- calendars, blackouts, timed pauses (issue 25: cronos.rules) --------------------------------
# Every write notifies `cronos_jobs` {"op": "rules"} in its transaction: the leader reloads both.

CALENDARS_ALL = "SELECT name, timezone, dates, ranges, weekdays, description FROM calendars ORDER BY name"
CALENDAR_GET = "SELECT name, timezone, dates, ranges, weekdays, description FROM calendars WHERE name = $1"
# $1 name, $2 timezone, $3 dates, $4 ranges, $5 weekdays, $6 description: create or replace.
CALENDAR_PUT = """
INSERT INTO calendars (name, timezone, dates, ranges, weekdays, description) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (name) DO UPDATE SET timezone = $2, dates = $3, ranges = $4, weekdays = $5, description = $6,
    updated_at = now()
RETURNING name, timezone, dates, ranges, weekdays, description, (xmax = 0) AS created
"""
# The same, create only: no row when the name exists.
CALENDAR_INSERT = """
INSERT INTO calendars (name, timezone, dates, ranges, weekdays, description) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (name) DO NOTHING
RETURNING name, timezone, dates, ranges, weekdays, description, true AS created
"""
CALENDAR_DELETE = "DELETE FROM calendars WHERE name = $1 RETURNING name"
# The jobs that name calendar $1 (a delete is refused while any does).
CALENDAR_USERS = """
SELECT id FROM jobs WHERE calendars @> jsonb_build_array(jsonb_build_object('name', $1::text)) ORDER BY id LIMIT 5
"""
# The calendars among $1 that exist (a job may name only those).
CALENDARS_NAMED = "SELECT name FROM calendars WHERE name = ANY($1::text[]) FOR KEY SHARE"
BLACKOUTS_ALL = """
SELECT id, name, action, starts_at, ends_at, cron_expression, duration_s, timezone, selector, note
FROM blackouts ORDER BY id
"""
BLACKOUT_GET = """
SELECT id, name, action, starts_at, ends_at, cron_expression, duration_s, timezone, selector, note
FROM blackouts WHERE id = $1
"""
# $1 name, $2 action, $3 starts_at, $4 ends_at, $5 cron_expression, $6 duration_s, $7 timezone, $8 selector, $9 note.
BLACKOUT_INSERT = """
INSERT INTO blackouts (name, action, starts_at, ends_at, cron_expression, duration_s, timezone, selector, note)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING id, name, action, starts_at, ends_at, cron_expression, duration_s, timezone, selector, note
"""
BLACKOUT_DELETE = "DELETE FROM blackouts WHERE id = $1 RETURNING name"
# Timed pauses the leader lifts (fenced, dispatcher.pauses): the jobs paused until now or before,
# locked (an API write of the same job waits, or is waited for). $2, $3: cronos.instants' range (a
# pause until an instant outside it, -infinity say, is never lifted: PAUSES_UNUSABLE reports it).
PAUSES_DUE = """
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner
FROM jobs
WHERE status = 'paused' AND paused_until <= now() AND paused_until >= $2 AND paused_until < $3
ORDER BY id
LIMIT $1
FOR UPDATE SKIP LOCKED
"""
PAUSES_NEXT = """
SELECT min(paused_until) FROM jobs
WHERE status = 'paused' AND paused_until IS NOT NULL AND paused_until >= $1 AND paused_until < $2
"""
# The timed pauses outside [$1, $2) (cronos.instants): a range at each end of jobs_paused_until, few
# rows if any (one OR of the two reads every paused job, each second).
PAUSES_UNUSABLE = """
SELECT id, paused_until FROM jobs WHERE status = 'paused' AND paused_until < $1
UNION ALL
SELECT id, paused_until FROM jobs WHERE status = 'paused' AND paused_until >= $2
"""

# --- backfill (API; cronos.backfill decides, cronos.store.backfill applies) ----------------------

# What the ledger holds about job $1's ticks in [$2, $3) (cronos.backfill.TickFacts), every trigger
# counted (a re-run by hand is a run of its tick): each tick's highest attempt and its state,
# whether a run of it ever started, its runs not ended. One snapshot, read under RERUN_LOCK. A
# cancelled run counts as started: an operator's decision, not a gap an outage left.
BACKFILL_TICK_FACTS = """
SELECT scheduled_for, max(attempt) AS last_attempt, (array_agg(state ORDER BY attempt DESC))[1] AS last_state,
    bool_or(state IN ('running', 'completed', 'failed', 'cancelled')) AS started,
    coalesce(array_agg(id ORDER BY id) FILTER (WHERE finished_at IS NULL), '{}') AS unfinished
FROM runs
WHERE job_id = $1 AND scheduled_for >= $2 AND scheduled_for < $3
GROUP BY scheduled_for
"""

# --- the fleet's planned starts (cronos.store.fleet; api.routes_fleet, schedule lint's herd) ----

# Active repeating jobs grouped by what decides their starts: (expression, zone, jitter). Ids only
# where jitter spreads them job by job; a window (start_at/end_at) is not applied (a view, not a plan).
FLEET_GROUPS = """
SELECT cron_expression, timezone, jitter_s, count(*) AS jobs,
       CASE WHEN jitter_s > 0 THEN array_agg(id ORDER BY id) END AS ids
FROM jobs
WHERE status = 'active' AND cron_expression IS NOT NULL AND run_at IS NULL
GROUP BY cron_expression, timezone, jitter_s
ORDER BY count(*) DESC, cron_expression, timezone, jitter_s
"""

# The jobs of the groups above whose expressions have an `H` ($1): each job's name picks its values
# (cronos.hashed), so these are walked name by name. Ids and names in the same (id) order.
FLEET_HASHED_JOBS = """
SELECT cron_expression, timezone, jitter_s, array_agg(id ORDER BY id) AS ids, array_agg(name ORDER BY id) AS names
FROM jobs
WHERE status = 'active' AND run_at IS NULL AND cron_expression = ANY($1::text[])
GROUP BY cron_expression, timezone, jitter_s
"""

# --- concurrency groups (cronos.store.groups; migration 0036) -----------------------------------
#
# Only runs of jobs that name a group come here: the claim of a job without one (CLAIM_FREE) and
# its finish read none of these tables. Every statement that grants slots runs after GROUPS_LOCK
# in its transaction: the group rows' lock serializes the claims and finishes of a group, so two
# executors cannot both take its last slot, and a finish sees every wait committed before it.

# The groups $1, locked in name order: one claim or release of a group at a time (NO KEY: a job
# naming the group meanwhile, whose foreign key check takes KEY SHARE, is not held up).
GROUPS_LOCK = """
SELECT name, run_limit FROM concurrency_groups WHERE name = ANY($1::text[]) ORDER BY name FOR NO KEY UPDATE
"""
# The groups of the slots the runs $1 hold, locked as GROUPS_LOCK does.
GROUPS_LOCK_OF_RUNS = """
SELECT name, run_limit FROM concurrency_groups
WHERE name IN (SELECT group_name FROM concurrency_group_slots WHERE run_id = ANY($1::bigint[]))
ORDER BY name FOR NO KEY UPDATE
"""
# What a group's allotment (cronos.lifecycle.allot) is decided on, read after GROUPS_LOCK: for each
# group of $1, its slots held (their runs queued or running: a run ended by any path holds none),
# and its first $2 waiting runs in tick order; and which of the runs $3 hold a slot already (woken
# with one).
GROUP_FACTS = """
SELECT 'held' AS kind, s.group_name, count(*)::integer AS held, NULL::bigint AS run_id, NULL::bigint AS job_id,
       NULL::timestamptz AS scheduled_for
FROM concurrency_group_slots s
WHERE s.group_name = ANY($1::text[])
  AND EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id AND r.finished_at IS NULL AND r.state IN ('queued', 'running'))
GROUP BY s.group_name
UNION ALL
SELECT 'waiter', g.name, NULL, w.id, w.job_id, w.scheduled_for
FROM unnest($1::text[]) AS g(name)
CROSS JOIN LATERAL (SELECT id, job_id, scheduled_for FROM runs WHERE state = 'waiting' AND waiting_for = g.name
                    ORDER BY waiting_for, scheduled_for, id LIMIT $2) w
UNION ALL
SELECT 'holder', s.group_name, NULL, s.run_id, s.job_id, s.scheduled_for
FROM concurrency_group_slots s WHERE s.run_id = ANY($3::bigint[])
"""
# Slots taken: one per row of $1 run, $2 group, $3 job, $4 tick (under GROUPS_LOCK).
SLOTS_TAKE = """
INSERT INTO concurrency_group_slots (run_id, group_name, job_id, scheduled_for)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::timestamptz[])
ON CONFLICT (run_id) DO NOTHING
"""
# The slots of the runs $1 freed (under GROUPS_LOCK_OF_RUNS), each only once its run is neither queued
# nor running (a finish in this transaction ended it; a claim refused a run another executor claimed
# meanwhile: that one keeps its slot); returns their groups.
SLOTS_RELEASE = """
DELETE FROM concurrency_group_slots s
WHERE s.run_id = ANY($1::bigint[])
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id AND r.finished_at IS NULL
                  AND r.state IN ('queued', 'running'))
RETURNING group_name
"""
# The leader's sweep: slots whose run ended without freeing them (replaced, expired, cancelled,
# deleted) are deleted; and the groups runs wait for. Both read little: the slots table holds a
# group's limit of rows, and the waiting runs of groups have their own partial index.
SLOTS_ORPHANED = """
DELETE FROM concurrency_group_slots s
WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id AND r.finished_at IS NULL
                  AND r.state IN ('queued', 'running'))
RETURNING group_name
"""
GROUPS_WAITED_FOR = "SELECT DISTINCT waiting_for FROM runs WHERE state = 'waiting' AND waiting_for IS NOT NULL"
# queued -> waiting (waited) for a group: the runs $1, each waiting for the group $2 names.
RUNS_WAIT_GROUP = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'waiting', pushed_epoch = NULL, waiting_for = c.grp
FROM locked l, unnest($1::bigint[], $2::text[]) AS c(id, grp)
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'queued' AND c.id = l.id
RETURNING r.id, r.job_id
"""
# The API's view and edits of groups (cronos.store.group_admin). A group with the slots held (by
# runs queued or running), the runs waiting for it and the jobs naming it; $1 one name or NULL: all.
GROUPS_LIST = """
SELECT g.name, g.run_limit, g.created_at, g.updated_at,
       (SELECT count(*) FROM concurrency_group_slots s WHERE s.group_name = g.name
          AND EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id AND r.finished_at IS NULL
                      AND r.state IN ('queued', 'running')))::integer AS holding,
       (SELECT count(*) FROM runs w WHERE w.state = 'waiting' AND w.waiting_for = g.name)::integer AS waiting,
       (SELECT count(*) FROM jobs j WHERE j.concurrency_group = g.name)::integer AS jobs
FROM concurrency_groups g WHERE $1::text IS NULL OR g.name = $1
ORDER BY g.name
"""
# A group's holders: runs with a slot (running, or woken with one and about to start), tick order.
GROUP_HOLDERS = """
SELECT s.run_id, s.job_id, j.name AS job_name, s.scheduled_for, r.state, r.started_at, r.node_id, s.granted_at
FROM concurrency_group_slots s
JOIN runs r ON r.id = s.run_id AND r.finished_at IS NULL AND r.state IN ('queued', 'running')
JOIN jobs j ON j.id = s.job_id
WHERE s.group_name = $1
ORDER BY s.scheduled_for, s.run_id
"""
# A group's first $2 waiting runs, in the order they get slots.
GROUP_WAITERS = """
SELECT w.id AS run_id, w.job_id, j.name AS job_name, w.scheduled_for, w.due_at
FROM runs w JOIN jobs j ON j.id = w.job_id
WHERE w.state = 'waiting' AND w.waiting_for = $1
ORDER BY w.waiting_for, w.scheduled_for, w.id LIMIT $2
"""
GROUP_JOBS = "SELECT id, name FROM jobs WHERE concurrency_group = $1 ORDER BY id LIMIT $2"
# Create the group $1 with the limit $2, or set its limit; `created` tells which.
GROUP_PUT = """
INSERT INTO concurrency_groups AS g (name, run_limit) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET run_limit = excluded.run_limit,
    updated_at = CASE WHEN g.run_limit = excluded.run_limit THEN g.updated_at ELSE now() END
RETURNING name, run_limit, created_at, updated_at, xmax = 0 AS created
"""
GROUP_DELETE = "DELETE FROM concurrency_groups WHERE name = $1 RETURNING name"

# --- run output (issue 39: cronos/run_output.py, cronos/store/run_output.py) ---------------------
# Written by executors a flush at a time (every run's pending lines in one statement), never on the
# claim or finish path. A repeated (run, seq) replaces the line: a cut line's count grows.
OUTPUT_WRITE = """
INSERT INTO run_output AS o (run_id, scheduled_for, seq, at, stream, line)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::int[], $4::timestamptz[], $5::text[], $6::text[])
ON CONFLICT (run_id, seq, scheduled_for) DO UPDATE SET at = excluded.at, line = excluded.line
"""
# Lines that left a run's tail window: run $1[i], tick $2[i], seq in [$3[i], $4[i]).
OUTPUT_TRIM = """
DELETE FROM run_output o
USING unnest($1::bigint[], $2::timestamptz[], $3::int[], $4::int[]) AS t(run_id, scheduled_for, lo, hi)
WHERE o.run_id = t.run_id AND o.scheduled_for = t.scheduled_for AND o.seq >= t.lo AND o.seq < t.hi
"""
# Followers (api/output_follow.py) hear which runs wrote: $1 their ids, comma-separated.
OUTPUT_CHANNEL = "cronos_output"
OUTPUT_NOTIFY = "SELECT pg_notify('cronos_output', $1)"
# Run $1's state and up to $3 of its lines from number $2 on (no line: one row of NULLs; no run: none).
OUTPUT_PAGE = """
SELECT r.state, o.seq, o.at, o.stream, o.line
FROM runs r
LEFT JOIN LATERAL (
    SELECT seq, at, stream, line FROM run_output
    WHERE run_id = r.id AND scheduled_for = r.scheduled_for AND seq >= $2
    ORDER BY seq LIMIT $3) o ON true
WHERE r.id = $1
ORDER BY o.seq
"""
# Partitions of run_output go with runs' (cronos/store/partitions.py), named alike, made the same way.
OUTPUT_PARTITION_BUILD = 'CREATE TABLE "{name}" (LIKE run_output INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
OUTPUT_PARTITION_TAKE_DEFAULT = """
WITH moved AS (DELETE FROM run_output_default WHERE scheduled_for >= $1 AND scheduled_for < $2 RETURNING *)
INSERT INTO "{name}"
SELECT *
FROM moved
"""
OUTPUT_PARTITION_ATTACH = """
ALTER TABLE run_output ATTACH PARTITION "{name}" FOR VALUES FROM ('{lower}') TO ('{upper}')
"""
OUTPUT_PARTITION_DROP = 'DROP TABLE IF EXISTS "{name}"'
# The default partition's output past retention whose run is gone (DEFAULT_PURGE), $2 lines at a time.
OUTPUT_DEFAULT_PURGE = """
DELETE
FROM run_output_default
WHERE ctid IN (SELECT o.ctid FROM run_output_default o WHERE o.scheduled_for < $1
    AND NOT EXISTS (SELECT 1 FROM runs_default r WHERE r.id = o.run_id) LIMIT $2)
"""

# --- run usage (issue 39: cronos/run_usage.py) ---------------------------------------------------
# Written in the finish's transaction, after FINISH_RUNS, for the runs it recorded that an executor
# measured: one statement for the batch, none when no run of it was measured (a reaped run).
USAGE_WRITE = """
INSERT INTO run_usage (run_id, scheduled_for, wall_ms, cpu_ms, cpu_user_ms, cpu_sys_ms, max_rss_bytes)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::float8[], $4::float8[], $5::float8[], $6::float8[],
    $7::bigint[])
ON CONFLICT (run_id, scheduled_for) DO NOTHING
"""
# Run $1's usage (tick $2: its day only); no row: not measured.
USAGE_OF_RUN = """
SELECT wall_ms, cpu_ms, cpu_user_ms, cpu_sys_ms, max_rss_bytes
FROM run_usage
WHERE run_id = $1 AND scheduled_for = $2
"""
# Partitions of run_usage go with runs' (cronos/store/partitions.py), named alike, made the same way.
USAGE_PARTITION_BUILD = 'CREATE TABLE "{name}" (LIKE run_usage INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
USAGE_PARTITION_TAKE_DEFAULT = """
WITH moved AS (DELETE FROM run_usage_default WHERE scheduled_for >= $1 AND scheduled_for < $2 RETURNING *)
INSERT INTO "{name}"
SELECT *
FROM moved
"""
USAGE_PARTITION_ATTACH = """
ALTER TABLE run_usage ATTACH PARTITION "{name}" FOR VALUES FROM ('{lower}') TO ('{upper}')
"""
USAGE_PARTITION_DROP = 'DROP TABLE IF EXISTS "{name}"'
# The default partition's usage past retention whose run is gone (DEFAULT_PURGE), $2 rows at a time.
USAGE_DEFAULT_PURGE = """
DELETE
FROM run_usage_default
WHERE ctid IN (SELECT u.ctid FROM run_usage_default u WHERE u.scheduled_for < $1
    AND NOT EXISTS (SELECT 1 FROM runs_default r WHERE r.id = u.run_id) LIMIT $2)
"""
