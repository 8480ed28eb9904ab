"""Every SQL statement Cronos runs, as a named constant. Run only by the store classes.

Sections: jobs (API), ledger (dispatcher), runs (executor), leader epoch.

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

from cronos.models import JOB_WRITABLE

# The channel the API notifies in the same transaction as each job write, and on each
# manual trigger. Payload: JSON {"op": "...", "job_id": N}; op is one of
# created, updated, deleted, paused, resumed, triggered; and retry, chain (runs queued by a finish).
JOBS_CHANNEL = "cronos_jobs"

NOTIFY = "SELECT pg_notify('" + JOBS_CHANNEL + "', $1)"

# A liveness probe, which also reads PostgreSQL's clock (unix time): the clock due times are
# judged by (cronos.clock).
PING = "SELECT extract(epoch FROM clock_timestamp())::float8"

# --- jobs (API) ---------------------------------------------------------------

_JOB = (
    "id, name, cron_expression, timezone, kind, payload, timeout_s, max_retries, retry_backoff_s,"
    " concurrency_policy, misfire_policy, misfire_grace_s, jitter_s, status, revision, last_scheduled_for,"
    " created_at, updated_at, managed_by, parents, queue, run_at, start_at, end_at, max_runs, catchup_max_per_s"
)
_RUN = (
    "id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at, finished_at,"
    " lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id"
)

# The cursor starts at creation: only ticks strictly after the job exists are due; a one-off
# created just after its run_at still has it due (the misfire grace decides; least() skips NULL).
_RUN_AT = f"${JOB_WRITABLE.index('run_at') + 1}"
JOB_INSERT = (
    f"INSERT INTO jobs ({', '.join(JOB_WRITABLE)}, last_scheduled_for)"
    f" VALUES ({', '.join(f'${i}' for i in range(1, len(JOB_WRITABLE) + 1))},"
    f" least(now(), {_RUN_AT}::timestamptz - interval '1 microsecond')) RETURNING {_JOB}"
)
JOB_GET = f"SELECT {_JOB} FROM jobs WHERE id = $1"
JOB_GET_FOR_UPDATE = f"SELECT {_JOB} FROM jobs WHERE id = $1 FOR UPDATE"
# $1 status filter or NULL, $2 last id seen (0 for the first page), $3 limit.
# A page of jobs by id: at most $3 rows, and cut once the payloads before a row reach $4 bytes
# of JSON (a page holds at least one job), so a page of big payloads stays small; `fetched` says
# how many rows the page had before the cut (more than returned: the client pages on).
JOB_LIST = (
    f"WITH page AS (SELECT {_JOB}, octet_length(payload::text) AS size FROM jobs"
    " WHERE ($1::text IS NULL OR status = $1) AND id > $2 ORDER BY id LIMIT $3),"
    " sized AS (SELECT *, sum(size) OVER (ORDER BY id) - size AS before FROM page)"
    f" SELECT {_JOB}, (SELECT count(*) FROM page) AS fetched FROM sized WHERE before < $4 ORDER BY id"
)
# $2.. the writable fields (JOB_WRITABLE's order), then the new revision number; then true when
# the schedule changed: the cursor moves to the change instant, backwards too (ticks written ahead
# under the old schedule were just handed over: cronos.store.revisions), and ticks planned under
# an older revision can no longer be written; then true on a resume: the cursor moves past the
# paused time (greatest() ignores NULL), so that time is not caught up.
_REV, _NEW_SCHEDULE, _RESUMED = (f"${len(JOB_WRITABLE) + n}" for n in (2, 3, 4))
JOB_UPDATE = (
    "UPDATE jobs SET "
    + ", ".join(f"{name} = ${i}" for i, name in enumerate(JOB_WRITABLE, 2))
    + f", revision = {_REV}, plan_revision = CASE WHEN {_NEW_SCHEDULE}::boolean THEN {_REV} ELSE plan_revision END,"
    f" last_scheduled_for = CASE WHEN {_NEW_SCHEDULE}::boolean THEN now()"
    f" WHEN {_RESUMED}::boolean THEN greatest(last_scheduled_for, now()) ELSE last_scheduled_for END,"
    " updated_at = now()"
    f" WHERE id = $1 RETURNING {_JOB}"
)
# $2 'active' or 'paused' (a change: the caller read the row locked), $3 the new revision number.
# In SET, `status` is the old value, so a resume moves the cursor past the paused time.
JOB_SET_STATUS = (
    "UPDATE jobs SET status = $2, revision = $3,"
    " last_scheduled_for = CASE WHEN status = 'paused' AND $2 = 'active'"
    " THEN greatest(last_scheduled_for, now()) ELSE last_scheduled_for END,"
    " updated_at = now()"
    f" WHERE id = $1 RETURNING {_JOB}"
)
# The signing secret, only where the API shows it: after a create, and on rotation.
JOB_WEBHOOK_SECRET = "SELECT webhook_secret FROM jobs WHERE id = $1"
JOB_ROTATE_WEBHOOK_SECRET = (
    "UPDATE jobs SET webhook_secret = cronos_new_webhook_secret(), updated_at = now() WHERE id = $1"
    " RETURNING webhook_secret"
)
JOB_DELETE = "DELETE FROM jobs WHERE id = $1 RETURNING id"
JOB_COUNT_BY_STATUS = "SELECT status, count(*) AS n FROM jobs GROUP BY status"
# A manual trigger: one queued run due now, even for a paused job. No row: the job is
# missing, or (vanishingly rare) a run with the same tick identity exists; retry then.
RUN_INSERT_MANUAL = (
    "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, exclusive, revision)"
    " SELECT id, now(), 1, 'manual', 'queued', now(), concurrency_policy <> 'allow', revision"
    " FROM jobs WHERE id = $1"
    f" ON CONFLICT DO NOTHING RETURNING {_RUN}"
)
RUN_GET = f"SELECT {_RUN} FROM runs WHERE id = $1"
RUN_LAST_OF_JOB = f"SELECT {_RUN} FROM runs WHERE job_id = $1 ORDER BY id DESC LIMIT 1"
# Newest tick first, then newest id (a retry after its first attempt). $2 state filter or NULL,
# ($3 scheduled_for, $4 id) of the last run seen or NULLs, $5 limit, $6 the window's oldest
# tick or NULL. Partitions are by scheduled_for, so ordered by it a page could be read newest day
# first and stop once full, but runs_default (which may hold any tick) makes PostgreSQL merge
# every day's runs_job_tick instead: the store asks for a window of recent days first ($6),
# which prunes the older days, and looks further back only when the page is not full.
RUN_LIST_OF_JOB = (
    f"SELECT {_RUN} FROM runs WHERE job_id = $1 AND ($2::text IS NULL OR state = $2)"
    " AND scheduled_for >= coalesce($6::timestamptz, '-infinity')"
    " AND scheduled_for <= coalesce($3::timestamptz, 'infinity')"
    " AND (scheduled_for, id) < (coalesce($3::timestamptz, 'infinity'), coalesce($4::bigint, 0))"
    " ORDER BY scheduled_for DESC, id DESC LIMIT $5"
)
# The tick of the run an "id:" cursor names (cursors from before 0018), so the walk goes on in tick order.
RUN_TICK_OF_JOB = "SELECT scheduled_for FROM runs WHERE id = $1 AND job_id = $2"
JOB_EXISTS = "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)"

# --- chains (API, cronos.store.chains) -------------------------------------------

# Changes of parents take turns (a transaction-scoped lock): two changes that each close half a
# cycle cannot both pass the check. Only writes that set parents take it.
CHAIN_LOCK = "SELECT pg_advisory_xact_lock(" + str(0x43484149) + ")"  # "CHAI"
# The parents named ($1), share-locked against their deletion until this write commits; and
# each one's own parents (the walk towards the roots that finds a cycle).
CHAIN_PARENTS_LOCK = "SELECT id, parents FROM jobs WHERE id = ANY($1::bigint[]) FOR KEY SHARE"
CHAIN_PARENTS_OF = "SELECT id, parents FROM jobs WHERE id = ANY($1::bigint[])"
# Jobs naming $1 as a parent (at most $2), for the refusal of its deletion.
CHAIN_CHILDREN = (
    "SELECT id, name FROM jobs WHERE parents @> ARRAY[$1::bigint] AND parents <> '{}'::bigint[] ORDER BY id LIMIT $2"
)
CHAIN_NAMES = "SELECT id, name FROM jobs WHERE id = ANY($1::bigint[])"

# --- job revisions (API) ----------------------------------------------------------

_REVISION = "job_id, number, kind, at, actor, status, fields, changes"
# $1 job id, $2 number, $3 kind, $4 actor, $5 status after it, $6 field names, $7 their new values
# (secrets redacted). Run in the transaction of the change it records.
REVISION_INSERT = (
    "INSERT INTO job_revisions (job_id, number, kind, actor, status, fields, changes)"
    f" VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {_REVISION}"
)
# Newest first. $1 job id, $2 last number seen or NULL, $3 limit.
REVISIONS_OF_JOB = (
    f"SELECT {_REVISION} FROM job_revisions WHERE job_id = $1 AND ($2::integer IS NULL OR number < $2)"
    " ORDER BY number DESC LIMIT $3"
)
REVISION_JOB_KNOWN = (
    "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1) OR EXISTS (SELECT 1 FROM job_revisions WHERE job_id = $1)"
)
# The hand-over: a job's ticks written ahead (due after this transaction's now(), still queued),
# locked in id order like every statement that locks runs. Found by tick identity (the order asks
# for its index: not the job's whole history, nor the queued runs of every job), naming no state.
RUNS_AHEAD_OF_JOB = (
    "WITH locked AS MATERIALIZED (SELECT id, scheduled_for, trigger, state FROM runs"
    " WHERE id = ANY(ARRAY(SELECT id FROM runs WHERE job_id = $1 AND scheduled_for > now() AND attempt = 1"
    " ORDER BY job_id, scheduled_for)) ORDER BY id FOR NO KEY UPDATE)"
    " SELECT id, scheduled_for FROM locked WHERE trigger = 'schedule' AND state = 'queued' ORDER BY id"
)

# --- ledger (dispatcher) ------------------------------------------------------

# Runs are partitioned by scheduled_for (migration 0009). A run looked up by id alone is looked
# for in every partition; so a statement on given ids looks among the unfinished runs only, as
# the partial index runs_unfinished_id does (a day of finished runs costs the lookup nothing),
# and writes the rows it found by id *and* scheduled_for, which leads each write to one
# partition. A queued or running run is always unfinished: every write of an end state sets
# finished_at, and nothing else does. The index names no state, so no statement that picks
# runs by state (the reaper's, the re-push's) can be planned on it.
_UNFINISHED = "finished_at IS NULL"


def _within(lo: int, hi: int, alias: str = "") -> str:
    """scheduled_for in [$lo, $hi) when the caller knows its runs' ticks (NULL: unbounded): then
    PostgreSQL looks only in the partitions of those days (pruned when planned, or when a generic
    plan starts)."""
    col = f"{alias}scheduled_for"
    return f"{col} >= coalesce(${lo}::timestamptz, '-infinity') AND {col} < coalesce(${hi}::timestamptz, 'infinity')"


# The dispatcher's view of a job. $1: ids (DISPATCH_JOBS_BY_ID); paused/deleted ones come back
# paused or not at all, and leave the leader's schedule.
_DISPATCH_JOB = (
    "id, cron_expression, timezone, misfire_policy, misfire_grace_s, jitter_s, concurrency_policy,"
    " status, coalesce(last_scheduled_for, created_at) AS cursor, revision, plan_revision,"
    " run_at, start_at, end_at, max_runs - scheduled_runs AS runs_left, catchup_max_per_s"
)
DISPATCH_JOBS_ACTIVE = f"SELECT {_DISPATCH_JOB} FROM jobs WHERE status = 'active'"
DISPATCH_JOBS_BY_ID = f"SELECT {_DISPATCH_JOB} FROM jobs WHERE id = ANY($1::bigint[])"
# The periodic resync (a safety net for lost notifications): what changed since $1 (every API
# write sets updated_at), and a digest of the active set that reveals deletions.
DISPATCH_JOBS_CHANGED = f"SELECT {_DISPATCH_JOB} FROM jobs WHERE updated_at > $1"
DISPATCH_ACTIVE_DIGEST = "SELECT count(*), coalesce(sum(id), 0)::bigint, now() FROM jobs WHERE status = 'active'"

# A run as a token needs it; times in UTC epoch ms (floor), the same way on every path. Its queue
# (the stream it goes to) is its job's now, looked up by primary key per returned row: a run
# queued before its job moved follows the job (migration 0015).
_TOKEN_COLS = (
    "r.id, r.job_id, floor(extract(epoch FROM r.scheduled_for) * 1000)::bigint AS scheduled_for_ms,"
    " r.attempt, r.trigger, floor(extract(epoch FROM r.due_at) * 1000)::bigint AS due_ms,"
    " (SELECT j.queue FROM jobs j WHERE j.id = r.job_id) AS queue"
)

# Ticks, ledger first (run inside a transaction that holds EPOCH_GUARD), in one statement:
# $1 epoch; $2-$6 one array per tick column ($6: the job revision that planned it). Each job's
# cursor moves to its newest tick here, only forward, only while the job is active and only
# when the ticks were planned under its current schedule (plan_revision); only those jobs get
# their ticks written (a job paused, deleted or given a new schedule meanwhile gets none; one
# whose cursor is already there was written before). An existing tick identity is left alone
# (RETURNING omits it: nothing is pushed twice). Rows are marked pushed by this epoch: the leader
# pushes them itself, at once or when their (jittered) due time comes. Returns id, job_id,
# scheduled_for_ms, due_ms, state, and the job's queue (by primary key: a join with `moved`, two
# CTE scans, is planned as a nested loop, n² for n ticks).
TICKS_WRITE = (
    "WITH t AS (SELECT * FROM unnest($2::bigint[], $3::timestamptz[], $4::timestamptz[], $5::text[],"
    " $6::integer[]) AS t(job_id, scheduled_for, due_at, skip_reason, revision)),"
    " moved AS ("
    " UPDATE jobs SET last_scheduled_for = c.cursor, scheduled_runs = scheduled_runs + c.runs"
    " FROM (SELECT job_id, max(scheduled_for) AS cursor, min(revision) AS revision,"
    " count(*) FILTER (WHERE skip_reason IS NULL) AS runs FROM t GROUP BY job_id) AS c"
    " WHERE jobs.id = c.job_id AND jobs.status = 'active' AND jobs.plan_revision <= c.revision"
    " AND (jobs.last_scheduled_for IS NULL OR jobs.last_scheduled_for < c.cursor)"
    " RETURNING jobs.id, jobs.concurrency_policy <> 'allow' AS exclusive)"
    " INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, exclusive, epoch,"
    " pushed_epoch, skip_reason, finished_at, revision)"
    " SELECT t.job_id, t.scheduled_for, 1, 'schedule',"
    " CASE WHEN t.skip_reason IS NULL THEN 'queued' ELSE 'skipped' END, t.due_at, m.exclusive, $1::bigint,"
    " CASE WHEN t.skip_reason IS NULL THEN $1::bigint END, t.skip_reason,"
    " CASE WHEN t.skip_reason IS NULL THEN NULL ELSE now() END, t.revision"
    " FROM t JOIN moved m ON m.id = t.job_id"
    " ON CONFLICT (job_id, scheduled_for, attempt) DO NOTHING"
    " RETURNING id, job_id, floor(extract(epoch FROM scheduled_for) * 1000)::bigint,"
    " floor(extract(epoch FROM due_at) * 1000)::bigint, state, (SELECT j.queue FROM jobs j WHERE j.id = job_id)"
)
# Jobs whose last tick the leader wrote (window over, max_runs reached, one-off done), in the
# tick write's fenced transaction: $1 ids, $2 'completed' or 'expired', $3 the revision that
# planned it. Only an active job whose schedule is still that revision's ends; the end is its
# next revision (kind 'ended'), as a pause is. Returns the ids of the jobs ended.
JOBS_END = (
    "WITH ended AS (UPDATE jobs SET status = e.status, revision = jobs.revision + 1, updated_at = now()"
    " FROM unnest($1::bigint[], $2::text[], $3::integer[]) AS e(id, status, revision)"
    " WHERE jobs.id = e.id AND jobs.status = 'active' AND jobs.plan_revision <= e.revision"
    " RETURNING jobs.id, jobs.revision, jobs.status)"
    " INSERT INTO job_revisions (job_id, number, kind, actor, status, fields, changes)"
    " SELECT id, revision, 'ended', 'dispatcher', status, ARRAY['status'], jsonb_build_object('status', status)"
    " FROM ended RETURNING job_id"
)
# Manual triggers and retries (queued by others, never pushed) that are due: mark and return.
# $1 epoch, $2 now, $3 limit.
QUEUED_TAKE_DUE = (
    "WITH pick AS MATERIALIZED (SELECT id, scheduled_for FROM runs WHERE state = 'queued' AND pushed_epoch IS NULL"
    " AND due_at <= $2 ORDER BY due_at LIMIT $3 FOR NO KEY UPDATE)"
    " UPDATE runs r SET pushed_epoch = $1 FROM pick WHERE r.id = pick.id AND r.scheduled_for = pick.scheduled_for"
    " RETURNING " + _TOKEN_COLS
)
QUEUED_NEXT_DUE = "SELECT min(due_at) FROM runs WHERE state = 'queued' AND pushed_epoch IS NULL"
# Queued runs that will not run (written ahead for a job paused, or given a schedule without
# them, before they were due: cronos.store.revisions; a tick refused by the overlap policy):
# recorded as skipped with reason $2.
QUEUED_SKIP = (
    "WITH locked AS MATERIALIZED (SELECT id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[])"
    f" AND {_UNFINISHED} ORDER BY id FOR NO KEY UPDATE)"
    " UPDATE runs r SET state = 'skipped', skip_reason = $2, finished_at = now()"
    " FROM locked l WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'queued' RETURNING r.id"
)
# Re-push (election, Redis lost its data): every queued run due by $2, in due order, a page of
# $5 after the keyset ($3 due_at, $4 id) of the last page (runs_queued_due_id reads just the page).
# Sent first in the re-push's transaction: over partitions, a page in due order must be a merge of
# each partition's index, not a sort of everything due, which the planner picks whenever stale
# statistics promise few queued runs (the whole backlog sorted for every page).
REPUSH_PLAN = "SET LOCAL enable_sort = off"
QUEUED_REPUSH = (
    "WITH pick AS MATERIALIZED (SELECT id, scheduled_for FROM runs WHERE state = 'queued' AND due_at <= $2"
    " AND (due_at, id) > ($3::timestamptz, $4::bigint) ORDER BY due_at, id LIMIT $5 FOR NO KEY UPDATE)"
    " UPDATE runs r SET pushed_epoch = $1 FROM pick WHERE r.id = pick.id AND r.scheduled_for = pick.scheduled_for"
    " RETURNING " + _TOKEN_COLS + ", r.due_at"
)
# The watchdog: queued runs whose token went out (pushed_epoch set) and that nobody has claimed
# $2 seconds past due, oldest first, leaving out $3 (run ids it re-pushed moments ago) and rows
# being claimed right now (SKIP LOCKED) and runs of jobs in the queues $5 (whose streams hold
# unread tokens: a backlog, not a loss; their jobs' queues are looked up only when $5 names one);
# a page of $4, marked pushed by epoch $1 (fenced). Sent after REPUSH_PLAN, for the same reason as
# QUEUED_REPUSH (a merge of each day's index).
QUEUED_OVERDUE_REPUSH = (
    "WITH pick AS MATERIALIZED (SELECT id, scheduled_for FROM runs WHERE state = 'queued'"
    " AND pushed_epoch IS NOT NULL AND due_at < now() - make_interval(secs => $2) AND NOT (id = ANY($3::bigint[]))"
    " AND (cardinality($5::text[]) = 0"
    " OR NOT (SELECT j.queue FROM jobs j WHERE j.id = runs.job_id) = ANY($5::text[]))"
    " ORDER BY due_at, id LIMIT $4 FOR NO KEY UPDATE SKIP LOCKED)"
    " UPDATE runs r SET pushed_epoch = $1 FROM pick WHERE r.id = pick.id AND r.scheduled_for = pick.scheduled_for"
    " RETURNING " + _TOKEN_COLS
)
# Before a token goes out again (re-push, watchdog): of the runs $1, the scheduled ticks now
# late beyond their job's misfire grace (at least $3 s) that the policy does not run end skipped
# $2 ("misfired"): under `skip` every one, under `run_once` all but the job's newest written tick
# (its cursor), which stands for them. A tick written ahead whose token was lost with Redis' data
# would otherwise start long after its grace (G7: the policy decides beyond the grace).
QUEUED_MISFIRE = (
    "WITH batch AS MATERIALIZED (SELECT id, job_id, state, scheduled_for, due_at FROM runs"
    f" WHERE id = ANY($1::bigint[]) AND {_UNFINISHED} AND trigger = 'schedule' AND attempt = 1),"
    " stale AS MATERIALIZED (SELECT b.id, b.scheduled_for FROM batch b JOIN jobs j ON j.id = b.job_id"
    " WHERE b.state = 'queued' AND b.due_at < now() - make_interval(secs => greatest(j.misfire_grace_s, $3))"
    " AND (j.misfire_policy = 'skip' OR (j.misfire_policy = 'run_once' AND b.scheduled_for < j.last_scheduled_for)))"
    " UPDATE runs r SET state = 'skipped', skip_reason = $2, finished_at = now()"
    " FROM stale s WHERE r.id = s.id AND r.scheduled_for = s.scheduled_for AND r.state = 'queued' RETURNING r.id"
)
# On election: runs an earlier leader meant to push later (jitter, spread catch-up) become
# "never pushed" again, so this leader's due watcher sees them.
QUEUED_UNMARK_FUTURE = (
    "UPDATE runs SET pushed_epoch = NULL WHERE state = 'queued' AND due_at > $1 AND pushed_epoch IS NOT NULL"
)


# --- runs (executor) ----------------------------------------------------------

# Run start and finish times are clock_timestamp(), not now() (the transaction's start): a
# claim that had to wait for the previous run's finish must not be stamped before it.

# Columns a claimed run carries to the executor: the run, plus what it needs of its job.
_CLAIMED = (
    "r.id, r.job_id, r.scheduled_for, r.attempt, r.trigger, r.epoch, r.started_at, r.exclusive,"
    " j.name, j.kind, j.payload, j.timeout_s, j.max_retries, j.retry_backoff_s, j.concurrency_policy,"
    " j.webhook_secret"
)

# Batch claim. $1 run ids, $2 node id, $3 lease seconds, [$4, $5) their ticks or NULL. Claims
# every queued run of the batch except those an exclusive policy must arbitrate (a running
# exclusive run of the same job, or a second exclusive run of one job in this batch): those stay
# queued, and STILL_QUEUED answers them by policy. A concurrent claim can still trip
# runs_one_running_exclusive (the primary key of runs_running_exclusive, which triggers keep:
# migration 0009); the caller then arbitrates run by run.
CLAIM_BATCH = (
    "WITH batch AS MATERIALIZED ("
    " SELECT id, job_id, exclusive, state, scheduled_for, attempt FROM runs WHERE id = ANY($1::bigint[])"
    f" AND {_UNFINISHED} AND {_within(4, 5)} ORDER BY id FOR NO KEY UPDATE),"
    " cand AS ("
    " SELECT b.id, b.job_id, b.exclusive, b.scheduled_for,"
    " row_number() OVER (PARTITION BY b.job_id, b.exclusive ORDER BY b.scheduled_for, b.attempt) AS n"
    " FROM batch b WHERE b.state = 'queued'),"
    " pick AS ("
    " SELECT c.id, c.scheduled_for FROM cand c WHERE NOT c.exclusive OR (c.n = 1 AND NOT EXISTS ("
    " SELECT 1 FROM runs_running_exclusive o WHERE o.job_id = c.job_id)))"
    " UPDATE runs r SET state = 'running', node_id = $2, started_at = clock_timestamp(),"
    " lease_until = now() + make_interval(secs => $3)"
    f" FROM pick p, jobs j WHERE r.id = p.id AND r.scheduled_for = p.scheduled_for AND {_within(4, 5, 'r.')}"
    " AND j.id = r.job_id"
    " RETURNING " + _CLAIMED
)
# What an exclusive policy answers a queued run `r` (of job `j`) while a run of its job is
# running: 'wait', 'buffer_full' or 'skipped' (a Refused value). `forbid` skips a tick only on a
# real overlap: its predecessor was already running at the tick and was itself on time. A
# predecessor that started after the tick was due, or one whose due time was put off (a paced
# catch-up run, a retry's backoff: due_at past its tick and jitter), is ordered before this
# tick, which waits for it; a tick that waited is due on time, so its own successor is judged
# as usual. `buffer_one` lets one due run wait. None running any more (it ended meanwhile):
# 'wait', and the run asks again at once.
_OVERLAP_ANSWER = (
    "CASE"
    " WHEN j.concurrency_policy = 'buffer_all' THEN 'wait'"
    " WHEN j.concurrency_policy = 'buffer_one' THEN CASE WHEN EXISTS ("
    " SELECT 1 FROM runs w WHERE w.job_id = r.job_id AND w.state = 'queued' AND w.exclusive AND w.due_at <= now()"
    " AND (w.scheduled_for, w.attempt) < (r.scheduled_for, r.attempt)) THEN 'buffer_full' ELSE 'wait' END"
    " WHEN EXISTS (SELECT 1 FROM runs o WHERE o.job_id = r.job_id AND o.state = 'running' AND o.exclusive"
    " AND o.started_at <= r.scheduled_for AND o.due_at <= o.scheduled_for + make_interval(secs => j.jitter_s))"
    " THEN 'skipped'"
    " ELSE 'wait' END"
)
# The runs of a batch left queued by CLAIM_BATCH (sent only when it did not claim them all); [$2, $3)
# as there. Each with the policy's answer when a run of its exclusive job is running now, so a
# backlog of waiting runs is answered in this one statement; NULL (arbitrate run by run, CLAIM_ONE):
# none is running (a concurrent claim tripped the index), or `replace`, or not exclusive.
STILL_QUEUED = (
    "WITH batch AS MATERIALIZED (SELECT id, job_id, state, exclusive, scheduled_for, attempt FROM runs"
    f" WHERE id = ANY($1::bigint[]) AND {_UNFINISHED} AND {_within(2, 3)})"
    " SELECT r.id, CASE WHEN r.exclusive AND j.concurrency_policy <> 'replace' AND EXISTS ("
    " SELECT 1 FROM runs_running_exclusive x WHERE x.job_id = r.job_id) THEN " + _OVERLAP_ANSWER + " END AS answer"
    " FROM batch r JOIN jobs j ON j.id = r.job_id WHERE r.state = 'queued' ORDER BY r.id"
)

# Per-run arbitration (the rare path). Lock the run and read its state and its job's policy;
# the caller goes on only while it is queued.
LOCK_RUN = (
    "SELECT r.id, r.job_id, r.exclusive, r.state, j.concurrency_policy FROM runs r JOIN jobs j ON j.id = r.job_id"
    f" WHERE r.id = $1 AND r.{_UNFINISHED} FOR NO KEY UPDATE OF r"
)
# A claim the unique index refused (another exclusive run of the job is running): skip it or
# let it wait, by policy (_OVERLAP_ANSWER).
OVERLAP_DECISION = "SELECT " + _OVERLAP_ANSWER + " FROM runs r JOIN jobs j ON j.id = r.job_id WHERE r.id = $1"
# Waiting runs asking again: those with no earlier run of their job still queued and due (so
# waiting runs start in tick order, not in the order their executors happen to ask). Each probes
# its own job's queued runs in runs_queued_job (LATERAL ... ORDER BY its columns LIMIT 1): a
# waiting run reads its job's queue, not the backlog. A NOT EXISTS is planned as an anti join
# that hashes every queued run of every job on every ask, and without the ORDER BY PostgreSQL
# may walk runs_queued_due_id past every other job's due run. A run that ended meanwhile (skipped
# by an edit's hand-over, say) has its turn: the claim then tells its caller it is not queued.
WAITERS_TURN = (
    "WITH r AS MATERIALIZED (SELECT id, job_id, scheduled_for, attempt FROM runs WHERE id = ANY($1::bigint[]))"
    " SELECT r.id FROM r LEFT JOIN LATERAL (SELECT 1 AS earlier FROM runs w WHERE w.job_id = r.job_id"
    " AND w.state = 'queued' AND w.exclusive AND w.due_at <= now()"
    " AND (w.scheduled_for, w.attempt) < (r.scheduled_for, r.attempt)"
    " ORDER BY w.scheduled_for, w.attempt LIMIT 1) e ON true WHERE e.earlier IS NULL"
)
# `replace`: end the job's other running exclusive run; its executor sees the loss at its next heartbeat.
REPLACE_RUNNING = (
    "UPDATE runs SET state = 'failed', error = $3, finished_at = clock_timestamp(), lease_until = NULL,"
    " duration_ms = extract(epoch FROM now() - started_at) * 1000"
    " WHERE job_id = $1 AND id <> $2 AND state = 'running' AND exclusive RETURNING id"
)
# The run is locked and queued (LOCK_RUN in the same transaction).
CLAIM_ONE = (
    "UPDATE runs r SET state = 'running', node_id = $2, started_at = clock_timestamp(),"
    " lease_until = now() + make_interval(secs => $3)"
    f" FROM jobs j WHERE r.id = $1 AND r.{_UNFINISHED} AND j.id = r.job_id RETURNING " + _CLAIMED
)

# Heartbeat for every run in flight on a node: extends the leases it still owns, returns their ids.
# [$4, $5): their ticks, or NULL.
EXTEND_LEASES = (
    "WITH locked AS MATERIALIZED (SELECT id, node_id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[])"
    f" AND {_UNFINISHED} AND {_within(4, 5)} ORDER BY id FOR NO KEY UPDATE)"
    " UPDATE runs r SET lease_until = now() + make_interval(secs => $3)"
    f" FROM locked l WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND {_within(4, 5, 'r.')}"
    " AND l.node_id = $2"
    " AND l.state = 'running' RETURNING r.id"
)

# Chains: each completed run queues a run of every active job naming its job as a parent, in
# the finish's statement (a crash between the two cannot lose the child), due at once. Its tick is
# the parent's finish instant (a ms apart per child when several parents of one child finish in
# one batch, so their lock keys differ); runs_chain_once makes it one run per (parent run, child),
# and a tick identity already taken (two parents of one child finishing in the same microsecond
# in two transactions) fails the finish, which is then retried (RunStore.finish): never dropped.
# Only jobs with parents are in jobs_parents: the batch's children are found once, through it (&&
# the batch's job ids), not once per finished run (3000 active jobs read per run, 80 ms of a
# 100 ms finish of 700 runs, when the planner trusted stale statistics); without chains, nothing.
_CHAINED = (
    " children AS MATERIALIZED (SELECT id, parents, concurrency_policy, revision FROM jobs"
    " WHERE parents && ARRAY(SELECT job_id FROM done WHERE state = 'completed') AND parents <> '{}'::bigint[]"
    " AND status = 'active'),"
    " chained AS ("
    " INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, exclusive, revision, parent_run_id)"
    " SELECT c.job_id, c.tick, 1, 'chain', 'queued', c.tick, c.exclusive, c.revision, c.parent_run_id FROM ("
    " SELECT j.id AS job_id, j.concurrency_policy <> 'allow' AS exclusive, j.revision, d.id AS parent_run_id,"
    " d.finished_at + (row_number() OVER (PARTITION BY j.id ORDER BY d.id) - 1) * interval '1 millisecond' AS tick"
    " FROM done d JOIN children j ON j.parents @> ARRAY[d.job_id] WHERE d.state = 'completed') c"
    " ON CONFLICT (parent_run_id, job_id, scheduled_for, attempt) WHERE parent_run_id IS NOT NULL DO NOTHING"
    " RETURNING job_id),"
)

# Batch finish, one statement, so the outcome and the retry it allows commit together.
# Each row is written only while `node_id` (the expected owner) still owns the run. Each run is
# looked up by its id (LATERAL: no plan can scan the runs to join them with the batch), in the
# order of $1, which the caller sorts: locks taken in id order.
# retry_delay_s NULL: no retry. The retry copies the tick identity with attempt + 1, its revision and
# its parent run (chains). [$9, $10): their ticks, or NULL.
FINISH_RUNS = (
    "WITH u AS MATERIALIZED (SELECT u.*, r.node_id AS owner, r.state AS current, r.scheduled_for AS tick"
    " FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],"
    " $8::float8[]) AS u(id, node_id, state, error, traceback, result, duration_ms, retry_delay_s),"
    " LATERAL (SELECT node_id, state, scheduled_for FROM runs r"
    f" WHERE r.id = u.id AND r.{_UNFINISHED} AND {_within(9, 10, 'r.')} FOR NO KEY UPDATE) r),"
    " done AS ("
    " UPDATE runs r SET state = u.state, finished_at = clock_timestamp(), lease_until = NULL, error = u.error,"
    " traceback = u.traceback, result = u.result,"
    " duration_ms = coalesce(u.duration_ms, extract(epoch FROM now() - r.started_at) * 1000)"
    f" FROM u WHERE r.id = u.id AND r.scheduled_for = u.tick AND {_within(9, 10, 'r.')}"
    " AND u.current = 'running' AND u.owner = u.node_id"
    " RETURNING r.id, r.job_id, r.scheduled_for, r.attempt, r.exclusive, r.state, u.retry_delay_s, r.revision,"
    " r.finished_at, r.parent_run_id),"
    " retried AS ("
    " INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, exclusive, revision, parent_run_id)"
    " SELECT d.job_id, d.scheduled_for, d.attempt + 1, 'retry', 'queued',"
    " now() + make_interval(secs => d.retry_delay_s), d.exclusive, d.revision, d.parent_run_id"
    " FROM done d WHERE d.state = 'failed' AND d.retry_delay_s IS NOT NULL"
    " ON CONFLICT (job_id, scheduled_for, attempt) DO NOTHING RETURNING job_id),"
    + _CHAINED
    + f" woken AS (SELECT pg_notify('{JOBS_CHANNEL}', json_build_object('op', op, 'job_id', job_id)::text)"
    " FROM (SELECT DISTINCT 'retry' AS op, job_id FROM retried UNION SELECT 'chain', job_id FROM chained) x)"
    " SELECT d.id, (SELECT count(*) FROM retried) AS retried, (SELECT count(*) FROM chained) AS chained,"
    " (SELECT count(*) FROM woken) AS woken FROM done d"
)

# The backlog: queued runs more than $1 seconds past due, counted up to $2 (the count reads at
# most that many index entries).
RUNS_OVERDUE = (
    "SELECT count(*) FROM (SELECT 1 FROM runs WHERE state = 'queued'"
    " AND due_at < now() - make_interval(secs => $1) LIMIT $2) AS overdue"
)

# Reaper (leader, fenced by EPOCH_GUARD).
LOST_RUNS = (
    "SELECT r.id, r.node_id, r.scheduled_for, r.attempt, j.kind, j.max_retries, j.retry_backoff_s"
    " FROM runs r JOIN jobs j ON j.id = r.job_id"
    " WHERE r.state = 'running' AND r.lease_until < now()"
    " ORDER BY r.lease_until LIMIT $1 FOR UPDATE OF r SKIP LOCKED"
)
# Queued runs past their job's misfire grace, oldest first. The index range is bounded by the
# smallest grace of any job, so runs still within every grace (a backlog being worked off) are
# not read each time; each job's grace is looked up per run (a subquery, not a join) so the scan
# follows the due_at index and stops at the limit.
EXPIRE_QUEUED = (
    "UPDATE runs r SET state = 'skipped', skip_reason = $2, finished_at = now()"
    " FROM (SELECT q.id, q.scheduled_for FROM runs q WHERE q.state = 'queued'"
    " AND q.due_at < now() - make_interval(secs => (SELECT coalesce(min(misfire_grace_s), 0) FROM jobs))"
    " AND q.due_at + make_interval(secs => (SELECT j.misfire_grace_s FROM jobs j WHERE j.id = q.job_id)) < now()"
    " ORDER BY q.due_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED) e"
    " WHERE r.id = e.id AND r.scheduled_for = e.scheduled_for RETURNING r.id"
)


# --- runs partitions (leader, cronos.store.partitions) -------------------------

# `runs` is partitioned by scheduled_for, a partition per UTC day (migration 0009), plus the one
# the migration made of the table before it (everything until a midnight) and a default one.
# Each partition's bounds, read back from its bound expression: lower NULL for MINVALUE,
# both NULL for the default partition.
PARTITIONS = (
    "SELECT c.relname AS name, b.expr = 'DEFAULT' AS is_default,"
    " substring(b.expr FROM 'FROM \\(''([^'']+)''\\)')::timestamptz AS lower,"
    " substring(b.expr FROM 'TO \\(''([^'']+)''\\)')::timestamptz AS upper"
    " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,"
    " LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) b"
    " WHERE i.inhparent = 'runs'::regclass ORDER BY upper NULLS LAST"
)
# DDL waits this long for a lock, then gives up until the next pass: while it waits, the
# statements behind it in the lock queue (claims, finishes) wait too.
PARTITION_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '500ms'"
# A new day, {name} from [{lower}, {upper}): built apart (no lock on runs while it is empty),
# handed the rows of its day that waited in the default partition, then attached. Attaching
# takes a SHARE UPDATE EXCLUSIVE lock on runs (claims and finishes go on), but an exclusive one
# on the default partition (scanned for rows of the day) and, for the foreign key, a SHARE ROW
# EXCLUSIVE one on jobs: the leader's cursor updates and API job writes wait for it.
PARTITION_BUILD = 'CREATE TABLE "{name}" (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
PARTITION_TAKE_DEFAULT = (
    "WITH moved AS (DELETE FROM runs_default WHERE scheduled_for >= $1 AND scheduled_for < $2 RETURNING *)"
    ' INSERT INTO "{name}" SELECT * FROM moved'
)
PARTITION_ATTACH = "ALTER TABLE runs ATTACH PARTITION \"{name}\" FOR VALUES FROM ('{lower}') TO ('{upper}')"
# Moving a running exclusive run out of the default partition ended its G3 row (a delete from
# runs); it is still running in its new partition.
PARTITION_RUNNING_EXCLUSIVE = (
    'INSERT INTO runs_running_exclusive (job_id, run_id) SELECT job_id, id FROM "{name}"'
    " WHERE state = 'running' AND exclusive ON CONFLICT DO NOTHING"
)
# A partition to drop must hold no run still to run or running (its partial indexes answer).
PARTITION_BUSY = "SELECT EXISTS (SELECT 1 FROM \"{name}\" WHERE state IN ('queued', 'running'))"
PARTITION_DETACH = 'ALTER TABLE runs DETACH PARTITION "{name}"'
PARTITION_DROP = 'DROP TABLE "{name}"'
# The default partition's rows past retention (never a queued or running one), $2 at a time.
DEFAULT_PURGE = (
    "DELETE FROM runs_default WHERE id IN (SELECT id FROM runs_default WHERE scheduled_for < $1"
    " AND state NOT IN ('queued', 'running') LIMIT $2)"
)


# --- reconciliation auditor (dispatcher/auditor.py) ----------------------------

# Jobs active through a window starting at $1: created and last changed before it.
AUDIT_JOBS = (
    "SELECT id, cron_expression, timezone, created_at FROM jobs"
    " WHERE status = 'active' AND created_at < $1 AND updated_at < $1"
    " AND cron_expression IS NOT NULL AND start_at IS NULL AND end_at IS NULL AND max_runs IS NULL"
)
# Their scheduled ticks in ($2, $3] that the ledger holds (any state), first attempts, with
# the start delay of those that started.
AUDIT_TICKS = (
    "SELECT job_id, scheduled_for, extract(epoch FROM started_at - scheduled_for)::float8 AS start_delay_s"
    " FROM runs WHERE job_id = ANY($1::bigint[]) AND scheduled_for > $2 AND scheduled_for <= $3"
    " AND attempt = 1 AND trigger = 'schedule'"
)


# --- leader epoch -------------------------------------------------------------

# Held FOR SHARE by every fenced write: an election (which updates the row) waits for the
# write to commit, and a write after an election sees the new epoch and does nothing.
EPOCH_GUARD = "SELECT epoch FROM leader_epoch WHERE id = 1 FOR SHARE"
EPOCH_TAKE = (
    "UPDATE leader_epoch SET epoch = epoch + 1, holder = $1, elected_at = now() WHERE id = 1"
    " RETURNING epoch, elected_at"
)
EPOCH_LOG = "INSERT INTO leader_log (epoch, holder, elected_at) VALUES ($1, $2, $3)"
EPOCH_CURRENT = "SELECT epoch, holder, elected_at FROM leader_epoch WHERE id = 1"

# --- API tokens ----------------------------------------------------------------

_TOKEN = "id, name, scopes, created_at, last_used_at, expires_at, revoked_at"

# $1 name, $2 SHA-256 of the token, $3 scopes, $4 expires_at or NULL. A live token of the
# same name makes it a unique violation.
TOKEN_INSERT = (
    f"INSERT INTO api_tokens (name, token_hash, scopes, expires_at) VALUES ($1, $2, $3, $4) RETURNING {_TOKEN}"
)
# Authentication: $1 SHA-256 of the presented token. The caller compares the hash again in
# constant time and reads revoked_at / expires_at itself (to say why a token is refused).
TOKEN_BY_HASH = f"SELECT {_TOKEN}, token_hash, now() AS now FROM api_tokens WHERE token_hash = $1"
# last_used_at moves at most once a minute per token: not a write per request.
TOKEN_TOUCH = (
    "UPDATE api_tokens SET last_used_at = now() WHERE id = $1"
    " AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')"
)
# Protected mode ends when any token can be used.
TOKEN_USABLE_EXISTS = (
    "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))"
)
TOKEN_LIST = f"SELECT {_TOKEN} FROM api_tokens WHERE revoked_at IS NULL ORDER BY name"
TOKEN_REVOKE = f"UPDATE api_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL RETURNING {_TOKEN}"

# --- audit trail ---------------------------------------------------------------

_AUDIT = "id, at, actor, subject, action, job_id, token_name, before, after, detail"

# $1 actor, $2 subject ('job' | 'token'), $3 action, $4 job id, $5 token name, $6 before,
# $7 after, $8 detail (jsonb or NULL each). Run in the transaction of the change it records.
AUDIT_INSERT = (
    "INSERT INTO audit_log (actor, subject, action, job_id, token_name, before, after, detail)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)
# Newest first. $1 job id, $2 last id seen or NULL, $3 limit.
AUDIT_OF_JOB = (
    f"SELECT {_AUDIT} FROM audit_log WHERE job_id = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3"
)
AUDIT_JOB_KNOWN = (
    "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1) OR EXISTS (SELECT 1 FROM audit_log WHERE job_id = $1)"
)
# Newest first. $1 subject, $2 last id seen or NULL, $3 limit.
AUDIT_OF_SUBJECT = (
    f"SELECT {_AUDIT} FROM audit_log WHERE subject = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3"
)

# --- console (API, read only) ---------------------------------------------------------

# The jobs page of the console: a page of jobs by id, each with its last started-or-ended run
# and its success over its last finished runs, both among its newest $6 runs: each lateral read
# walks at most $6 entries of runs_job_newest (job_id, id DESC), so a page costs the same with
# 10,000 jobs and millions of runs, whatever their states. $1 status or NULL, $2 ILIKE pattern on
# the name or NULL (escaped by the caller), $3 last id seen (0 first), $4 page size, $5 finished
# runs the rate is over.
JOB_OVERVIEW = (
    "WITH page AS (SELECT id, name, cron_expression, timezone, kind, status FROM jobs"
    " WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR name ILIKE $2) AND id > $3"
    " ORDER BY id LIMIT $4)"
    " SELECT p.id, p.name, p.cron_expression, p.timezone, p.kind, p.status,"
    " l.id AS run_id, l.state AS run_state, l.scheduled_for AS run_scheduled_for, l.due_at AS run_due_at,"
    " l.started_at AS run_started_at, l.duration_ms AS run_duration_ms,"
    " s.completed, s.finished"
    " FROM page p"
    " LEFT JOIN LATERAL (SELECT * FROM (SELECT id, state, scheduled_for, due_at, started_at, duration_ms"
    "  FROM runs WHERE job_id = p.id ORDER BY id DESC LIMIT $6) recent"
    "  WHERE state <> 'queued' ORDER BY id DESC LIMIT 1) l ON true"
    " LEFT JOIN LATERAL (SELECT count(*) FILTER (WHERE state = 'completed') AS completed, count(*) AS finished"
    "  FROM (SELECT state FROM (SELECT id, state FROM runs WHERE job_id = p.id ORDER BY id DESC LIMIT $6) recent"
    "  WHERE state IN ('completed', 'failed') ORDER BY id DESC LIMIT $5) f) s ON true"
    " ORDER BY p.id"
)

# --- tick accountability (API, read only; cronos.store.ticks) ----------------------------------

# A job's revisions up to $2 and its creation, oldest first (changes are partial: the schedule at
# an instant is every revision before it folded together). $1 job id, $2 the window's end.
TICK_HISTORY = f"SELECT {_REVISION} FROM job_revisions WHERE job_id = $1 AND (at <= $2 OR number = 1) ORDER BY number"
# How far the ledger is written for the job (its cursor); no row: the job was deleted.
TICK_CURSOR = "SELECT last_scheduled_for FROM jobs WHERE id = $1"
# The ledger's rows of the job's ticks in ($2, $3]: scheduled runs and their retries (a manual or chain
# run is no tick). The bounds on scheduled_for prune the day partitions and walk the
# (job_id, scheduled_for, attempt) unique index.
TICK_RUNS = (
    "SELECT id, scheduled_for, attempt, trigger, revision, state, started_at, skip_reason FROM runs"
    " WHERE job_id = $1 AND scheduled_for > $2 AND scheduled_for <= $3 AND trigger IN ('schedule', 'retry')"
    " ORDER BY scheduled_for, attempt"
)
