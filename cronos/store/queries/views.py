"""Read-only views of runs and jobs for the API and the console (pages, overview, ticks, fleet)."""

from __future__ import annotations

# --- runs of a job (API, read only) ---------------------------------------------------------------


# Sent first, in the same transaction, before a page whose best plan depends on its value (a
# status, a name search): a generic plan (a prepared statement's, after five runs) cannot tell a
# status few jobs have from one all have, nor read a pattern's trigrams, and walks every job.
PAGE_PLAN = "SET LOCAL plan_cache_mode = force_custom_plan"
RUN_GET = """
SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id,
    waiting_for, nullif(host, '') AS host
FROM runs
WHERE id = $1
"""
RUN_LAST_OF_JOB = """
SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id,
    nullif(host, '') AS host
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
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id,
    nullif(host, '') AS host
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


# --- all runs (API, read only; cronos.store.run_views) --------------------------------------------

# GET /api/runs: newest run first (by id, the order runs entered the ledger), a page from a scan of
# at most $4 index entries below the cursor $1, so a filter that matches rarely costs no more than
# one that matches every run: the page is then short, and the caller goes on from the last entry
# scanned. Four statements, one per index (a generic plan cannot switch indexes on a NULL): every
# run (the primary key) or one job's ($11, runs_job_newest), and those ended failed, skipped or
# cancelled (runs_unhappy_newest, runs_unhappy_job: migration 0030). [$2, $3): whole UTC days
# holding the time range (NULL: open), which prune the day partitions and cut no row of them;
# the exact range [$7, $8) on scheduled_for is tested with the other filters: $5 states, $6
# trigger, $9 queue (each NULL: any). $10 the page size. The namespace, last ($11, or $12 after a
# job's id): a run belongs to its job's namespace, looked up by the job's key for each run that
# passed the other filters (the runs table holds no namespace; a scalar subquery, which keeps the
# scan lazy where EXISTS became a semi-join that read it whole). The scan is read lazily: a page that
# fills stops it there; a short one reads it to its end, and its last row comes after the hits
# (`scan_end`, with how many entries the scan read).
RUNS_PAGE = """
WITH scanned AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
        finished_at, lease_until, duration_ms, error, skip_reason, created_at, parent_run_id, nullif(host, '') AS host
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
      AND (SELECT j.namespace FROM jobs j WHERE j.id = scanned.job_id) = $11
    LIMIT $10)
SELECT false AS scan_end, NULL::bigint AS scanned, * FROM hits
UNION ALL
(SELECT true, count(*) OVER (), * FROM scanned ORDER BY id LIMIT 1)
LIMIT $10
"""
RUNS_PAGE_OF_JOB = """
WITH scanned AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
        finished_at, lease_until, duration_ms, error, skip_reason, created_at, parent_run_id, nullif(host, '') AS host
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
      AND (SELECT j.namespace FROM jobs j WHERE j.id = scanned.job_id) = $12
    LIMIT $10)
SELECT false AS scan_end, NULL::bigint AS scanned, * FROM hits
UNION ALL
(SELECT true, count(*) OVER (), * FROM scanned ORDER BY id LIMIT 1)
LIMIT $10
"""
RUNS_PAGE_UNHAPPY = """
WITH scanned AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
        finished_at, lease_until, duration_ms, error, skip_reason, created_at, parent_run_id, nullif(host, '') AS host
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
      AND (SELECT j.namespace FROM jobs j WHERE j.id = scanned.job_id) = $11
    LIMIT $10)
SELECT false AS scan_end, NULL::bigint AS scanned, * FROM hits
UNION ALL
(SELECT true, count(*) OVER (), * FROM scanned ORDER BY id LIMIT 1)
LIMIT $10
"""
RUNS_PAGE_UNHAPPY_OF_JOB = """
WITH scanned AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
        finished_at, lease_until, duration_ms, error, skip_reason, created_at, parent_run_id, nullif(host, '') AS host
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
      AND (SELECT j.namespace FROM jobs j WHERE j.id = scanned.job_id) = $12
    LIMIT $10)
SELECT false AS scan_end, NULL::bigint AS scanned, * FROM hits
UNION ALL
(SELECT true, count(*) OVER (), * FROM scanned ORDER BY id LIMIT 1)
LIMIT $10
"""


# --- runs ahead of a job's revision (API, read only) ----------------------------------------------

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


# --- console (API, read only) ---------------------------------------------------------

# The jobs page of the console: a page of jobs by id, each with its last started-or-ended run
# and its success over its last finished runs, both among its newest runs (the recent runs'
# bound): each lateral read walks at most that many entries of runs_job_newest (job_id, id DESC),
# so a page costs the same with 10,000 jobs and millions of runs, whatever their states. Five
# statements, one per filter, so that no plan (a prepared statement's generic one included) walks
# every job for a filter that matches few (a million jobs: a status none has took 1.7 s).
# No filter: $1 last id seen (0 first), $2 page size, $3 finished runs the rate is over, $4 the
# recent runs' bound, $5 the namespace (each statement's last parameter).
JOB_OVERVIEW = """
WITH page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor, schedules, spread FROM jobs
    WHERE namespace = $5 AND id > $1 ORDER BY id LIMIT $2)
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor, p.schedules, p.spread,
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
WITH page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor, schedules, spread FROM jobs
    WHERE status = $1 AND namespace = $6 AND id > $2 ORDER BY id LIMIT $3)
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor, p.schedules, p.spread,
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
WITH slice AS MATERIALIZED (SELECT id, status, name, labels FROM jobs WHERE namespace = $9 AND id > $3 ORDER BY id
    LIMIT $8),
    page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor, schedules, spread FROM jobs
    WHERE id IN (SELECT id FROM slice WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR name ILIKE $2)
        AND ($7::jsonpath IS NULL OR labels @@ $7::jsonpath) ORDER BY id LIMIT $4))
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor, p.schedules, p.spread,
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
    AND ($7::jsonpath IS NULL OR labels @@ $7::jsonpath) AND namespace = $8),
    page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor, schedules, spread FROM jobs
    WHERE id IN (SELECT id FROM hits WHERE id > $3 ORDER BY id LIMIT $4))
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor, p.schedules, p.spread,
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
WITH hits AS MATERIALIZED (SELECT id FROM jobs WHERE labels @@ $6::jsonpath AND ($1::text IS NULL OR status = $1)
    AND namespace = $7),
    page AS (SELECT id, name, cron_expression, timezone, kind, status, every, anchor, schedules, spread FROM jobs
    WHERE id IN (SELECT id FROM hits WHERE id > $2 ORDER BY id LIMIT $3))
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status, p.every, p.anchor, p.schedules, p.spread,
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
    CASE WHEN fields && ARRAY['cron_expression', 'timezone', 'every', 'anchor', 'name', 'schedules', 'spread']
        THEN (SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb) FROM jsonb_each(changes)
              WHERE key IN ('cron_expression', 'timezone', 'every', 'anchor', 'name', 'schedules', 'spread'))
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
    || coalesce((SELECT jsonb_build_object('schedules', changes -> 'schedules') FROM job_revisions
                 WHERE job_id = $1 AND number <= $2 AND 'schedules' = ANY(fields)
                 ORDER BY number DESC LIMIT 1), '{}'::jsonb)
    || coalesce((SELECT jsonb_build_object('spread', changes -> 'spread') FROM job_revisions
                 WHERE job_id = $1 AND number <= $2 AND 'spread' = ANY(fields)
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


# --- the fleet's planned starts (cronos.store.fleet; api.routes_fleet, schedule lint's herd) ----

# Active repeating jobs grouped by what decides their starts: (expression, zone, jitter, spread). Ids
# only where jitter spreads them job by job; a window (start_at/end_at) is not applied (a view, not a plan).
FLEET_GROUPS = """
SELECT cron_expression, timezone, jitter_s, spread, count(*) AS jobs,
       CASE WHEN jitter_s > 0 THEN array_agg(id ORDER BY id) END AS ids
FROM jobs
WHERE status = 'active' AND cron_expression IS NOT NULL AND run_at IS NULL
GROUP BY cron_expression, timezone, jitter_s, spread
ORDER BY count(*) DESC, cron_expression, timezone, jitter_s, spread
"""
# The jobs of the groups above whose expressions have an `H` ($1) or that have a spread: each job's
# name picks its values (cronos.hashed) and offset (cronos.spread), so these are walked name by name.
# Ids and names in the same (id) order.
FLEET_HASHED_JOBS = """
SELECT cron_expression, timezone, jitter_s, spread, array_agg(id ORDER BY id) AS ids,
       array_agg(name ORDER BY id) AS names
FROM jobs
WHERE status = 'active' AND run_at IS NULL AND cron_expression IS NOT NULL
  AND (cron_expression = ANY($1::text[]) OR spread IS NOT NULL)
GROUP BY cron_expression, timezone, jitter_s, spread
"""


# --- run output (API, read only) ------------------------------------------------------------------

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
