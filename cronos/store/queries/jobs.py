"""Job statements: the API's writes and reads of jobs (their columns as `cronos.models.Job`
names them, in its order: tests/unit/test_queries.py), revisions, chains, calendars, blackouts,
pauses, backfills, concurrency groups, and the dispatcher's view of jobs."""

from __future__ import annotations

# --- jobs (API) ---------------------------------------------------------------


# The cursor starts at creation: only ticks strictly after the job exists are due; a one-off
# created just after its run_at still has it due (the misfire grace decides; least() skips NULL).
# Never before $33, the first usable instant: a run_at there would put the cursor outside the
# range, and the leader skip the job as unusable (that tick is past any grace anyway).
JOB_INSERT = """
INSERT INTO jobs (name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, managed_by, parents, queue, run_at,
    start_at, end_at, max_runs, catchup_max_per_s, expectations, every, anchor, calendars, labels, owner,
    concurrency_group, hosts, chain, schedules, namespace, spread, last_scheduled_for)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24,
    $25, $26, $27, $28, $29, $30, $31, $32, $33,
    greatest(least(now(), $17::timestamptz - interval '1 microsecond'), $34))
RETURNING id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread
"""
JOB_GET = """
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread
FROM jobs
WHERE id = $1
"""
JOB_GET_FOR_UPDATE = """
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread
FROM jobs
WHERE id = $1 FOR UPDATE
"""
# $1 last id seen (0 for the first page), $2 limit, $4 the namespace.
# A page of jobs by id: at most $2 rows, and cut once the payloads before a row reach $3 bytes
# of JSON (a page holds at least one job), so a page of big payloads stays small; `fetched` says
# how many rows the page had before the cut (more than returned: the client pages on).
JOB_LIST = """
WITH page AS (SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries,
    retry_backoff_s, concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision,
    last_scheduled_for, created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs,
    catchup_max_per_s, expectations, every, anchor, calendars, paused_until, pause_note, labels, owner,
    concurrency_group, hosts, chain, schedules, namespace, spread, octet_length(payload::text) AS size FROM jobs
    WHERE namespace = $4 AND id > $1 ORDER BY id LIMIT $2),
    sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread,
    (SELECT count(*) FROM page) AS fetched
FROM sized
WHERE before < $3
ORDER BY id
"""
# JOB_LIST of the jobs in status $1, through jobs_status_id (status, id) (PAGE_PLAN first: a million
# jobs, none paused, and `?status=paused` read them all).
JOB_LIST_STATUS = """
WITH page AS (SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries,
    retry_backoff_s, concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision,
    last_scheduled_for, created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs,
    catchup_max_per_s, expectations, every, anchor, calendars, paused_until, pause_note, labels, owner,
    concurrency_group, hosts, chain, schedules, namespace, spread, octet_length(payload::text) AS size FROM jobs
    WHERE status = $1 AND namespace = $5 AND id > $2 ORDER BY id LIMIT $3),
    sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread,
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
WITH slice AS MATERIALIZED (SELECT id, status, labels FROM jobs WHERE namespace = $7 AND id > $2 ORDER BY id
    LIMIT $6),
    page AS (SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries,
    retry_backoff_s, concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision,
    last_scheduled_for, created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs,
    catchup_max_per_s, expectations, every, anchor, calendars, paused_until, pause_note, labels, owner,
    concurrency_group, hosts, chain, schedules, namespace, spread, octet_length(payload::text) AS size FROM jobs
    WHERE id IN (SELECT id FROM slice WHERE ($1::text IS NULL OR status = $1) AND labels @@ $5::jsonpath
        ORDER BY id LIMIT $3)),
    sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)
SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.payload, p.timeout_s, p.max_retries,
    p.retry_backoff_s, p.concurrency_policy, p.misfire_policy, p.misfire_grace_s, p.jitter_s, p.status, p.revision,
    p.last_scheduled_for, p.created_at, p.updated_at, p.managed_by, p.parents, p.queue, p.run_at, p.start_at,
    p.end_at, p.max_runs, p.catchup_max_per_s, p.expectations, p.every, p.anchor, p.calendars, p.paused_until,
    p.pause_note, p.labels, p.owner, p.concurrency_group, p.hosts, p.chain, p.schedules, p.namespace, p.spread,
    p.before, p.size,
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
WITH hits AS MATERIALIZED (SELECT id FROM jobs WHERE labels @@ $5::jsonpath AND ($1::text IS NULL OR status = $1)
    AND namespace = $6),
    page AS (SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries,
    retry_backoff_s, concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision,
    last_scheduled_for, created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs,
    catchup_max_per_s, expectations, every, anchor, calendars, paused_until, pause_note, labels, owner,
    concurrency_group, hosts, chain, schedules, namespace, spread, octet_length(payload::text) AS size FROM jobs
    WHERE id IN (SELECT id FROM hits WHERE id > $2 ORDER BY id LIMIT $3)),
    sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread,
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
    labels = $27, owner = $28, concurrency_group = $29, hosts = $30, chain = $31, schedules = $32,
    namespace = $33, spread = $34, revision = $35,
    plan_revision = CASE WHEN $36::boolean THEN $35 ELSE plan_revision END,
    last_scheduled_for = CASE WHEN $36::boolean THEN now() WHEN $37::boolean THEN greatest(last_scheduled_for,
    now()) ELSE last_scheduled_for END, updated_at = now(),
    paused_until = CASE WHEN $14 = 'paused' THEN paused_until END,
    pause_note = CASE WHEN $14 = 'paused' THEN pause_note END
WHERE id = $1
RETURNING id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread
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
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread
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
JOB_EXISTS = "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)"


# --- chains (API, cronos.store.chains) -------------------------------------------

# Changes of parents take turns (a transaction-scoped lock): two changes that each close half a
# cycle cannot both pass the check. Only writes that set parents take it.
CHAIN_LOCK = "SELECT pg_advisory_xact_lock(1128808777)"
# The parents named ($1), share-locked against their deletion until this write commits; and
# each one's own parents (the walk towards the roots that finds a cycle).
CHAIN_PARENTS_LOCK = "SELECT id, parents, namespace FROM jobs WHERE id = ANY($1::bigint[]) FOR KEY SHARE"
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


# --- the dispatcher's view of jobs (dispatcher) ---------------------------------------------------

# The dispatcher's view of a job. $1: ids (DISPATCH_JOBS_BY_ID); paused/deleted ones come back
# paused or not at all, and leave the leader's schedule.
DISPATCH_JOBS_ACTIVE = """
SELECT id, cron_expression, timezone, misfire_policy, misfire_grace_s, jitter_s, concurrency_policy, status,
    coalesce(last_scheduled_for, created_at) AS cursor, revision, plan_revision, run_at, start_at, end_at,
    max_runs - scheduled_runs AS runs_left, catchup_max_per_s, queue, every, anchor,
    CASE WHEN kind = 'task' THEN payload->>'action' END AS action, kind = 'shell' AS shell, name, calendars, hosts,
    schedules, spread
FROM jobs
WHERE status = 'active'
"""
DISPATCH_JOBS_BY_ID = """
SELECT id, cron_expression, timezone, misfire_policy, misfire_grace_s, jitter_s, concurrency_policy, status,
    coalesce(last_scheduled_for, created_at) AS cursor, revision, plan_revision, run_at, start_at, end_at,
    max_runs - scheduled_runs AS runs_left, catchup_max_per_s, queue, every, anchor,
    CASE WHEN kind = 'task' THEN payload->>'action' END AS action, kind = 'shell' AS shell, name, calendars, hosts,
    schedules, spread
FROM jobs
WHERE id = ANY($1::bigint[])
"""
# The periodic resync (a safety net for lost notifications): what changed since $1 (every API
# write sets updated_at), and a digest of the active set that reveals deletions.
DISPATCH_JOBS_CHANGED = """
SELECT id, cron_expression, timezone, misfire_policy, misfire_grace_s, jitter_s, concurrency_policy, status,
    coalesce(last_scheduled_for, created_at) AS cursor, revision, plan_revision, run_at, start_at, end_at,
    max_runs - scheduled_runs AS runs_left, catchup_max_per_s, queue, every, anchor,
    CASE WHEN kind = 'task' THEN payload->>'action' END AS action, kind = 'shell' AS shell, name, calendars, hosts,
    schedules, spread
FROM jobs
WHERE updated_at > $1
"""
DISPATCH_ACTIVE_DIGEST = (
    "SELECT count(*) AS jobs, coalesce(sum(id), 0)::bigint AS id_sum, now() AS now FROM jobs WHERE status = 'active'"
)
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


# --- backfill callers (API) -----------------------------------------------------------------------

# The job as a trigger with inputs checks them: its row share-locked (FOR KEY SHARE: a concurrent
# change of the job waits until the run is queued; the leader's cursor writes do not).
JOB_GET_KEY_SHARE = """
SELECT id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,
    concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,
    created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s,
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread
FROM jobs
WHERE id = $1 FOR KEY SHARE
"""
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


# --- calendars, blackouts, timed pauses (issue 25: cronos.rules) --------------------------------
# Every write notifies `cronos_jobs` {"op": "rules"} in its transaction: the leader reloads both.

CALENDARS_ALL = "SELECT name, timezone, dates, ranges, weekdays, description, namespace FROM calendars ORDER BY name"
CALENDAR_GET = "SELECT name, timezone, dates, ranges, weekdays, description, namespace FROM calendars WHERE name = $1"
# $1 name, $2 timezone, $3 dates, $4 ranges, $5 weekdays, $6 description, $7 its namespace: create or
# replace; no row when the name is another namespace's (names are unique across the cluster).
CALENDAR_PUT = """
INSERT INTO calendars (name, timezone, dates, ranges, weekdays, description, namespace)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (name) DO UPDATE SET timezone = $2, dates = $3, ranges = $4, weekdays = $5, description = $6,
    updated_at = now()
WHERE calendars.namespace = $7
RETURNING name, timezone, dates, ranges, weekdays, description, namespace, (xmax = 0) AS created
"""
# The same, create only: no row when the name exists.
CALENDAR_INSERT = """
INSERT INTO calendars (name, timezone, dates, ranges, weekdays, description, namespace)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (name) DO NOTHING
RETURNING name, timezone, dates, ranges, weekdays, description, namespace, true AS created
"""
CALENDAR_DELETE = "DELETE FROM calendars WHERE name = $1 RETURNING name"
# The jobs that name calendar $1 (a delete is refused while any does).
CALENDAR_USERS = """
SELECT id FROM jobs WHERE calendars @> jsonb_build_array(jsonb_build_object('name', $1::text)) ORDER BY id LIMIT 5
"""
# The calendars among $1 that exist (a job may name only those).
CALENDARS_NAMED = "SELECT name, namespace FROM calendars WHERE name = ANY($1::text[]) FOR KEY SHARE"
# The namespace of concurrency group $1 (a job may name only its own namespace's).
GROUP_NAMESPACE = "SELECT namespace FROM concurrency_groups WHERE name = $1"
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
    expectations, every, anchor, calendars, paused_until, pause_note, labels, owner, concurrency_group,
    hosts, chain, schedules, namespace, spread
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
