"""Run transitions: each statement applies one event of cronos.lifecycle.TRANSITIONS to runs.

Each event's statement is guarded by the event's from-states (and its fence) as the table says:
`tests/unit/test_queries.py` binds each statement to its event and checks its guard against
`TRANSITIONS`. The decisions (claims_at_once, overlap, expiry) are made in cronos.lifecycle,
between the facts a statement reads and the one that applies them; no statement restates one.
A run's expiry (the end of its misfire grace) is stamped once, when it is created, in
`expires_at` (lifecycle.expiry, given to the insert); every statement that judges lateness
compares an instant with that column, none computes a grace.
Each statement is written out as PostgreSQL runs it (grep for a clause and find it).

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

# --- manual runs (API) ----------------------------------------------------------------------------


# A manual trigger: one queued run due now, even for a paused job, expiring $2 after (its job's
# grace as lifecycle.grace stamps it). No row: the job is missing, or (vanishingly rare) a run with
# the same tick identity exists; retry then.
RUN_INSERT_MANUAL = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, expires_at)
SELECT id, now(), 1, 'manual', 'queued', now(), revision, now() + $2::interval
FROM jobs
WHERE id = $1
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id
"""


# --- cancel (API, cronos.store.cancels) -------------------------------------------

# The run $1, locked against a claim, a finish or a wake while its cancel is decided (the API's
# cancel reads it by id alone: every partition, once per operator's click).
# The concurrency group of the run $1's job (NULL: none): a cancel locks it (GROUPS_LOCK) before the
# run, in the order a claim takes them, so freeing the run's slot cannot deadlock with a claim.
RUN_JOB_FOR_CANCEL = "SELECT j.concurrency_group, j.kind FROM runs r JOIN jobs j ON j.id = r.job_id WHERE r.id = $1"
RUN_LOCK_FOR_CANCEL = """
SELECT id, job_id, scheduled_for, state FROM runs WHERE id = $1 FOR NO KEY UPDATE
"""
# queued, waiting or reserved (not started) -> cancelled (Event.CANCELLED): the run $1 of tick $2,
# with its error $3 (who). A reserved run's executor finds it cancelled when it goes to start it.
RUN_CANCEL = """
UPDATE runs SET state = 'cancelled', error = $3, finished_at = now(), pushed_epoch = NULL, lease_until = NULL
WHERE id = $1 AND scheduled_for = $2 AND state IN ('queued', 'waiting', 'reserved')
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


# --- "retry this run" (API, cronos.store.reruns) --------------------------------------------------

# The facts of a retry by hand (cronos.lifecycle.rerun): run $1, its job's kind and grace, its tick's newest
# attempt and an attempt of the tick still unfinished (looked up by tick identity: its day only).
RERUN_FACTS = """
SELECT r.id, r.job_id, r.scheduled_for, r.attempt, r.state, r.revision, r.parent_run_id, j.kind, j.misfire_grace_s,
    now() AS now,
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
# $5 revision, $6 parent run, $7 expiry (lifecycle.expiry); only while no attempt of the tick is
# unfinished, and once per tick identity (a concurrent retry of the same tick gets no row).
RERUN_INSERT = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, parent_run_id, expires_at)
SELECT $1, $2, $3, 'retry', 'queued', $4, $5, $6, $7
WHERE NOT EXISTS (SELECT 1 FROM runs t WHERE t.job_id = $1 AND t.scheduled_for = $2
    AND t.state IN ('queued', 'waiting', 'reserved', 'running'))
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id
"""


# --- ticks written (leader, cronos.store.ledger; fenced) ------------------------------------------

# Runs are partitioned by scheduled_for (migration 0009). A run looked up by id alone is looked
# for in every partition; so a statement on given ids looks among the unfinished runs only, as
# the partial index runs_unfinished_id does (a day of finished runs costs the lookup nothing),
# and writes the rows it found by id *and* scheduled_for, which leads each write to one
# partition. A queued or running run is always unfinished: every write of an end state sets
# finished_at, and nothing else does. The index names no state, so no statement that picks
# runs by state (the reaper's, the re-push's) can be planned on it.


# Ticks, ledger first (written: run inside a transaction that holds EPOCH_GUARD), in one
# statement: $1 epoch; $2-$6 one array per tick column ($6: the job revision that planned it), and
# $10 each tick's expiry (lifecycle.expiry).
# Each job's cursor moves to its newest tick here, only forward, and only while the job is active
# and its schedule is still the one that planned the ticks (plan_revision: the fence of a schedule
# change, as the epoch is the leader's); only those jobs get their ticks written (a job paused,
# deleted or given a new schedule meanwhile gets none; one whose cursor is already there was
# written before). An existing tick identity is left alone (RETURNING omits it: nothing is pushed
# twice). Rows are marked pushed by this epoch: the leader's outbox pushes them itself, at once or
# when their (jittered) due time comes. The run's identity and state only: max_runs' count
# (JOBS_COUNT_RUNS) and the end of a job (JOBS_END) follow from what it returns.
# $7: for each tick of a job that holds one pending run at most (cronos.lifecycle.one_pending, NULL
# for the others), the leader's round's instant: the tick, due to run, is written skipped $8 while
# the job has a run queued or waiting that has not expired at $7 (lifecycle.expired: its stamped
# expires_at) and was due before $9 (overdue at the round: lifecycle.overdue_before), written in
# this epoch (a run a
# leader before wrote ahead and never pushed is overdue by the failover, not by a backlog: G7),
# read in runs_pending_job (the job's own: a range of runs_queued_due_id read every job's, 2 ms a
# tick at 1,000 jobs overloaded). Those probes are made only when some run not started is overdue
# since the batch's earliest $7 at all (`o`, a one-time filter: the first entry in that range of
# runs_queued_due_id, and the waiting runs, in runs_waiting_job: none on the hot path): none is,
# the common case, and no job is probed (the probes of 300 jobs in 5 partitions cost a seventh of
# the tick write's buffers, 2026-12-07). A due-time index of waiting runs of its own made the
# planner read CLAIM_FACTS' buffer_one look-up through it (test_query_plans).
TICKS_WRITE = """
WITH t AS (
    SELECT * FROM unnest($2::bigint[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::integer[],
                         $7::timestamptz[], $10::timestamptz[])
        AS t(job_id, scheduled_for, due_at, skip_reason, revision, held_at, expires_at)),
held AS (
    SELECT DISTINCT t.job_id FROM t
    WHERE t.held_at IS NOT NULL AND t.skip_reason IS NULL
      AND (EXISTS (SELECT 1 FROM runs o WHERE o.state = 'queued' AND o.due_at < $9
                   AND o.expires_at > (SELECT min(held_at) FROM t))
           OR EXISTS (SELECT 1 FROM runs o WHERE o.state = 'waiting' AND o.due_at < $9
                      AND o.expires_at > (SELECT min(held_at) FROM t)))
      AND EXISTS (SELECT 1 FROM runs p WHERE p.job_id = t.job_id AND p.state IN ('queued', 'waiting')
                  AND p.due_at < $9 AND p.expires_at > t.held_at AND p.epoch = $1)),
r AS (
    SELECT t.job_id, t.scheduled_for, t.due_at, t.revision, t.expires_at,
           CASE WHEN t.skip_reason IS NULL AND h.job_id IS NOT NULL THEN $8::text ELSE t.skip_reason END AS skip_reason
    FROM t LEFT JOIN held h ON h.job_id = t.job_id),
moved AS (
    UPDATE jobs SET last_scheduled_for = c.cursor
    FROM (SELECT job_id, max(scheduled_for) AS cursor, min(revision) AS revision FROM t GROUP BY job_id) AS c
    WHERE jobs.id = c.job_id AND jobs.status = 'active' AND jobs.plan_revision <= c.revision
      AND (jobs.last_scheduled_for IS NULL OR jobs.last_scheduled_for < c.cursor)
    RETURNING jobs.id)
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, epoch, pushed_epoch, skip_reason, finished_at,
                  revision, expires_at)
SELECT t.job_id, t.scheduled_for, 1, 'schedule', CASE WHEN t.skip_reason IS NULL THEN 'queued' ELSE 'skipped' END,
       t.due_at, $1::bigint, CASE WHEN t.skip_reason IS NULL THEN $1::bigint END, t.skip_reason,
       CASE WHEN t.skip_reason IS NULL THEN NULL ELSE now() END, t.revision, t.expires_at
FROM r t JOIN moved m ON m.id = t.job_id
ON CONFLICT (job_id, scheduled_for, attempt, host) DO NOTHING
RETURNING id, job_id, floor(extract(epoch FROM scheduled_for) * 1000)::bigint AS scheduled_for_ms,
          floor(extract(epoch FROM due_at) * 1000)::bigint AS due_ms, state, skip_reason,
          floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms
"""

# Runs on every host (cronos.every_host), in the transaction of TICKS_WRITE and only for the ticks
# of per-host jobs it just wrote (skipped per_host: the tick's own row): one queued run per
# (tick, host) $2-$6, marked pushed by epoch $1 like the ticks. The unique key holds one per host.
TICKS_FAN_OUT = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, epoch, pushed_epoch, revision, host,
                  expires_at)
SELECT t.job_id, t.scheduled_for, 1, 'schedule', 'queued', t.due_at, $1::bigint, $1::bigint, t.revision, t.host,
       t.expires_at
FROM unnest($2::bigint[], $3::timestamptz[], $4::timestamptz[], $5::integer[], $6::text[], $7::timestamptz[])
    AS t(job_id, scheduled_for, due_at, revision, host, expires_at)
ON CONFLICT (job_id, scheduled_for, attempt, host) DO NOTHING
RETURNING id, job_id, floor(extract(epoch FROM scheduled_for) * 1000)::bigint AS scheduled_for_ms,
          floor(extract(epoch FROM due_at) * 1000)::bigint AS due_ms, state, skip_reason, host,
          floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms
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
# a per-host run's host (cronos.every_host), and its job's queue (the stream its token goes to),
# task action and whether it is a shell job (executors route on them).
OUTBOX_TAKE = """
WITH pick AS MATERIALIZED (
    SELECT id, job_id, scheduled_for, attempt, trigger, due_at, host, expires_at FROM runs
    WHERE state = 'queued' AND pushed_epoch IS NULL AND due_at <= $1
    ORDER BY due_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED)
SELECT p.id, p.job_id, p.scheduled_for, p.attempt, p.trigger, p.due_at, nullif(p.host, '') AS host, p.expires_at,
       j.misfire_policy, j.misfire_grace_s, j.last_scheduled_for AS cursor, j.queue,
       CASE WHEN j.kind = 'task' THEN j.payload->>'action' END AS action, j.kind = 'shell' AS shell
FROM pick p JOIN jobs j ON j.id = p.job_id
"""
# queued -> queued, pushed by epoch $1 (pushed): the runs $2 (which OUTBOX_TAKE locked); those of
# $3 (stale ticks their misfire policy keeps) due anew at $4, expiring at $5 (one per run of $3:
# lifecycle.due_anew), so no claim or reaper expires them.
OUTBOX_MARK = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs WHERE id = ANY($2::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET pushed_epoch = $1, due_at = CASE WHEN r.id = ANY($3::bigint[]) THEN $4 ELSE r.due_at END,
       expires_at = CASE WHEN r.id = ANY($3::bigint[]) THEN ($5::timestamptz[])[array_position($3::bigint[], r.id)]
                    ELSE r.expires_at END
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
# (NULL: unknown): each run's state, tick, due time and expiry (a run claimed past it expires
# instead: lifecycle.expired), its job's policy, jitter and misfire grace (the expiry of a run a
# leader of the release before wrote unstamped: lifecycle.expiry), the job's running
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
    SELECT id, job_id, state, scheduled_for, attempt, due_at, expires_at FROM runs
    WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
      AND scheduled_for >= coalesce($2::timestamptz, '-infinity')
        AND scheduled_for < coalesce($3::timestamptz, 'infinity'))
SELECT b.id, b.job_id, b.state, b.scheduled_for, b.attempt, b.due_at, b.expires_at,
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
# queued, not expired (their stamped expires_at: lifecycle.expired), the only run of their job in the batch, and
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
    SELECT id, job_id, state, scheduled_for, due_at, expires_at, count(*) OVER (PARTITION BY job_id) AS of_job FROM runs
    WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
      AND scheduled_for >= coalesce($4::timestamptz, '-infinity')
        AND scheduled_for < coalesce($5::timestamptz, 'infinity')),
free AS MATERIALIZED (
    SELECT b.id
    FROM batch b JOIN jobs j ON j.id = b.job_id
    WHERE b.of_job = 1 AND b.state = 'queued' AND j.concurrency_group IS NULL
      AND b.expires_at > clock_timestamp()
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
          CASE WHEN $6::text = 'reserved' THEN r.lease_until END AS lease_until, r.expires_at,
          j.name, j.kind, j.payload, j.timeout_s, j.max_retries, j.retry_backoff_s, j.concurrency_policy,
          j.webhook_secret
"""
# reserved -> running (started): the runs $1 that node $2 still owns, at their due instant, before
# their work begins; ticks in [$3, $4). A run the API took back (queued again, cancelled, deleted)
# or the reaper released is not returned: its executor claims it as a queued run, or drops it.
# Ids in, ids and start times out: nothing of the job is read or decoded (its reservation did that).
RUNS_START = """
WITH locked AS MATERIALIZED (
    SELECT id, node_id, state, scheduled_for FROM runs
    WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
      AND scheduled_for >= coalesce($3::timestamptz, '-infinity')
        AND scheduled_for < coalesce($4::timestamptz, 'infinity')
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'running', started_at = clock_timestamp()
FROM locked l
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'reserved' AND l.node_id = $2
  AND r.scheduled_for >= coalesce($3::timestamptz, '-infinity')
    AND r.scheduled_for < coalesce($4::timestamptz, 'infinity')
RETURNING r.id, r.started_at
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
# reserved -> queued (taken_back): job $1's runs reserved by an executor and not started, taken back
# by the API's change of the job (holding the job's row lock, before its hand-over): queued again,
# their tokens still out, so their executor's start finds them queued and claims them with the job
# as changed, or finds them handed over. Found among the runs owned now (runs_owned_lease), not in
# the job's history.
RUNS_TAKE_BACK = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs
    WHERE id = ANY(ARRAY(SELECT o.id FROM runs o WHERE o.state IN ('reserved', 'running')
                         AND o.lease_until IS NOT NULL AND o.job_id = $1))
      AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'queued', node_id = NULL, lease_until = NULL
FROM locked l
WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'reserved'
RETURNING r.id
"""
# reserved -> queued (released; the reaper, fenced by EPOCH_GUARD): runs reserved whose lease ran
# out before they started (their executor is gone), at most $1, oldest lease first: back in the
# outbox (pushed_epoch NULL), pushed again at once and claimed as any queued run, or expired.
RUNS_RELEASE = """
WITH pick AS MATERIALIZED (
    SELECT id, scheduled_for FROM runs
    WHERE state = 'reserved' AND lease_until < now()
    ORDER BY lease_until LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED)
UPDATE runs r SET state = 'queued', node_id = NULL, lease_until = NULL, pushed_epoch = NULL
FROM pick WHERE r.id = pick.id AND r.scheduled_for = pick.scheduled_for
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
# queued or waiting -> skipped with reason $2 (overlapped, expired): the runs $1.
RUNS_SKIP = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'skipped', skip_reason = $2, finished_at = now()
FROM locked l WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state IN ('queued', 'waiting')
RETURNING r.id, r.job_id
"""
# queued -> skipped with reason $2 (misfired: the outbox, fenced; handed_over: the API, holding the
# job's row lock): the runs $1.
RUNS_SKIP_QUEUED = """
WITH locked AS MATERIALIZED (
    SELECT id, state, scheduled_for FROM runs WHERE id = ANY($1::bigint[]) AND finished_at IS NULL
    ORDER BY id FOR NO KEY UPDATE)
UPDATE runs r SET state = 'skipped', skip_reason = $2, finished_at = now()
FROM locked l WHERE r.id = l.id AND r.scheduled_for = l.scheduled_for AND l.state = 'queued'
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
# running -> completed | failed | cancelled (completed, failed, lost, stopped): each run of $1 written
# only while the node $2 (its expected owner) still owns it; $3 the end state, $4 error, $5
# traceback, $6 result excerpt, $7 duration (NULL: from started_at); ticks in [$8, $9). Each run is looked up by its id
# (LATERAL: no plan can scan the runs to join them with the batch), in the order of $1, which the
# caller sorts (locks in id order). The run's identity and state only: its follow-ups (the retry,
# chain runs, waking the run waiting behind it) are the caller's, in the same transaction.
FINISH_RUNS = """
WITH u AS MATERIALIZED (
    SELECT u.*, r.node_id AS owner, r.state AS current, r.scheduled_for AS tick
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[])
        AS u(id, node_id, state, error, traceback, result, duration_ms),
    LATERAL (SELECT node_id, state, scheduled_for FROM runs r
             WHERE r.id = u.id AND r.finished_at IS NULL
               AND r.scheduled_for >= coalesce($8::timestamptz, '-infinity')
                 AND r.scheduled_for < coalesce($9::timestamptz, 'infinity')
             FOR NO KEY UPDATE) r)
UPDATE runs r SET state = u.state, finished_at = clock_timestamp(), lease_until = NULL, error = u.error,
       traceback = u.traceback, result = u.result,
       duration_ms = coalesce(u.duration_ms, extract(epoch FROM now() - r.started_at) * 1000)
FROM u
WHERE r.id = u.id AND r.scheduled_for = u.tick AND u.current = 'running' AND u.owner = u.node_id
  AND r.scheduled_for >= coalesce($8::timestamptz, '-infinity')
    AND r.scheduled_for < coalesce($9::timestamptz, 'infinity')
RETURNING r.id, r.job_id, r.scheduled_for, r.attempt, r.state, r.exclusive, r.started_at, r.finished_at,
          r.revision, r.parent_run_id, r.due_at, r.expires_at
"""
# The facts a finish's follow-ups are decided on (cronos.lifecycle), read after FINISH_RUNS in its
# transaction (so they see every wait committed before the finish could end its run):
# kind 'child': (parent job, child job, child revision, child grace, the child's parents and
# chain: when its edges fire, whether it joins, cronos.chains) for each active job naming one of
# $1 (the jobs of the runs that ended their tick) as a parent. Only jobs with parents are in jobs_parents, so
# without chains this costs nothing.
# kind 'waiter': the first $3 waiting runs of each of the jobs $2 (whose exclusive runs ended),
# in tick order, with their job's policy and jitter, while no run of that job is running.
FOLLOW_UP_FACTS = """
SELECT 'child' AS kind, p.parent AS job_id, c.id AS child_id, c.revision AS child_revision,
       c.misfire_grace_s AS child_grace_s,
       NULL::bigint AS run_id, NULL::timestamptz AS scheduled_for, NULL::integer AS attempt,
       NULL::timestamptz AS due_at, NULL::text AS policy, NULL::float8 AS jitter_s, c.parents AS child_parents,
       c.chain
FROM jobs c, unnest(c.parents) AS p(parent)
WHERE c.parents && $1::bigint[] AND c.parents <> '{}'::bigint[] AND c.status = 'active' AND p.parent = ANY($1::bigint[])
UNION ALL
SELECT 'waiter', f.job_id, NULL, NULL, NULL, w.id, w.scheduled_for, w.attempt, w.due_at, j.concurrency_policy,
       j.jitter_s, NULL, NULL
FROM unnest($2::bigint[]) AS f(job_id)
JOIN jobs j ON j.id = f.job_id
CROSS JOIN LATERAL (
    SELECT id, scheduled_for, attempt, due_at FROM runs
    WHERE job_id = f.job_id AND state = 'waiting' AND waiting_for IS NULL
    ORDER BY job_id, scheduled_for, attempt LIMIT $3) w
WHERE NOT EXISTS (SELECT 1 FROM runs_running_exclusive x WHERE x.job_id = f.job_id)
"""
# New queued runs (retried, chained, and the API's triggered): one per row of the arrays $1 job,
# $2 tick, $3 attempt, $4 trigger, $5 due_at, $6 revision, $7 parent run, $8 expiry (lifecycle.expiry),
# $9 the run of the same tick whose host it runs on (a retry's failed attempt: a per-host run's retry
# goes to its host, cronos.every_host; NULL: none, as every other run). A tick identity already
# taken is left alone (RETURNING omits it: the caller tells a chain run's tick collision from a
# repeat). Never pushed: the outbox takes them when due.
RUNS_QUEUE = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, parent_run_id, expires_at, host)
SELECT u.job_id, u.tick, u.attempt, u.trigger, 'queued', u.due_at, u.revision, u.parent_run_id, u.expires_at,
    CASE WHEN u.host_of IS NULL THEN ''
         ELSE coalesce((SELECT p.host FROM runs p WHERE p.id = u.host_of AND p.scheduled_for = u.tick), '') END
FROM unnest($1::bigint[], $2::timestamptz[], $3::integer[], $4::text[], $5::timestamptz[], $6::integer[], $7::bigint[],
            $8::timestamptz[], $9::bigint[])
     AS u(job_id, tick, attempt, trigger, due_at, revision, parent_run_id, expires_at, host_of)
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for, attempt, trigger, parent_run_id
"""
# Chained (cronos.store.joins): the child runs joins decided (one per row: $1 child, $2 tick (the
# join's: attempt 1 of it), $3 'queued' or 'skipped', $4 due, $5 revision, $6 the parent run that
# decided it, $7 the skip reason, $8 its expiry (lifecycle.expiry)). A tick of the child already taken
# is left alone (RETURNING omits it). A join makes a run queued (Event.CHAINED) or, as the ticks of
# TICKS_WRITE, skipped from the start with its reason.
RUNS_JOIN = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, parent_run_id, skip_reason,
                  finished_at, expires_at)
SELECT u.job_id, u.tick, 1, 'chain', u.state, u.due_at, u.revision, u.parent_run_id,
       CASE WHEN u.state = 'skipped' THEN u.reason END, CASE WHEN u.state = 'skipped' THEN clock_timestamp() END,
       u.expires_at
FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::timestamptz[], $5::integer[], $6::bigint[], $7::text[],
            $8::timestamptz[])
     AS u(job_id, tick, state, due_at, revision, parent_run_id, reason, expires_at)
WHERE u.state IN ('queued', 'skipped')
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for
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
WHERE r.state = 'running' AND r.lease_until < now()
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
# queued or waiting -> skipped $2 (expired): runs still pending at their stamped expiry
# (lifecycle.expired), $1 at most of each, the longest expired first. The queued ones are read in
# runs_queued_expiry's order, whatever each job's grace (a backlog within its runs' graces is not
# read); waiting runs are few (one job's backlog behind its running run).
EXPIRE_PENDING = """
WITH queued AS MATERIALIZED (
    SELECT q.id, q.scheduled_for FROM runs q
    WHERE q.state = 'queued' AND q.expires_at <= now()
    ORDER BY q.expires_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED),
waiting AS MATERIALIZED (
    SELECT w.id, w.scheduled_for FROM runs w
    WHERE w.state = 'waiting' AND w.expires_at <= now()
    ORDER BY w.expires_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED)
UPDATE runs r SET state = 'skipped', skip_reason = $2, finished_at = now()
FROM (SELECT * FROM queued UNION ALL SELECT * FROM waiting) e
WHERE r.id = e.id AND r.scheduled_for = e.scheduled_for
RETURNING r.id, r.job_id
"""
# Pending runs a leader of the release before wrote with no expiry (a rolling upgrade), $1 at
# most, with what lifecycle.expiry stamps them from; RUNS_STAMP_EXPIRY writes it ($1 runs, $2
# their ticks, $3 their expiries), before the reaper's EXPIRE_PENDING judges them.
RUNS_UNSTAMPED = """
SELECT r.id, r.scheduled_for, r.due_at, j.misfire_grace_s
FROM ((SELECT id, job_id, scheduled_for, due_at FROM runs WHERE state = 'queued' AND expires_at IS NULL LIMIT $1)
      UNION ALL
      (SELECT id, job_id, scheduled_for, due_at FROM runs WHERE state = 'waiting' AND expires_at IS NULL LIMIT $1)) r
JOIN jobs j ON j.id = r.job_id
"""
RUNS_STAMP_EXPIRY = """
UPDATE runs r SET expires_at = u.expires_at
FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS u(id, tick, expires_at)
WHERE r.id = u.id AND r.scheduled_for = u.tick AND r.expires_at IS NULL
"""


# --- run inputs (API, executor; cronos.inputs, cronos.store.inputs) -----------------------------

# Re-runs of job $1's ticks take turns (a transaction-scoped lock in its own two-key space): two
# re-runs of one tick would otherwise both see it ended and queue attempts whose retries collide.
RERUN_LOCK = "SELECT pg_advisory_xact_lock(1381322574, ($1::bigint % 2147483647)::integer)"
# What a re-run of job $1's tick $2 is decided on (cronos.inputs.rerun_attempt): its highest
# attempt (NULL: no run) and its runs that have not ended. One statement, one snapshot: a finish
# that queues a retry commits both or neither.
TICK_RERUN_FACTS = """
SELECT max(attempt) AS last, coalesce(array_agg(id ORDER BY id) FILTER (WHERE finished_at IS NULL), '{}') AS unfinished
FROM runs
WHERE job_id = $1 AND scheduled_for = $2
"""
# A re-run of job $1's tick $2 as attempt $3: queued, due now, even for a paused job, expiring $4
# after (lifecycle.grace). No row: the job is missing, or the attempt was taken meanwhile.
RUN_INSERT_RERUN = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, expires_at)
SELECT id, $2, $3, 'manual', 'queued', now(), revision, now() + $4::interval
FROM jobs
WHERE id = $1
ON CONFLICT DO NOTHING
RETURNING id, job_id, scheduled_for, attempt, trigger, revision, state, due_at, node_id, epoch, started_at,
    finished_at, lease_until, duration_ms, error, traceback, result, skip_reason, created_at, parent_run_id
"""
# The circuit breaker's canary (cronos.store.breaker) of job $1 for its tick $2: queued, due now
# though the job is paused (as a manual run is), the next attempt of that tick, expiring $3 after
# (lifecycle.grace). No row: the attempt was taken meanwhile (the next pass tries).
CANARY_INSERT = """
INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, expires_at)
SELECT id, $2, coalesce((SELECT max(attempt) FROM runs WHERE job_id = $1 AND scheduled_for = $2), 0) + 1, 'manual',
    'queued', now(), revision, now() + $3::interval
FROM jobs
WHERE id = $1
ON CONFLICT DO NOTHING
RETURNING id
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


# --- waiting for a concurrency group (executor) ---------------------------------------------------
#
# Only runs of jobs that name a group come here: the claim of a job without one (CLAIM_FREE) and
# its finish read none of these tables. Every statement that grants slots runs after GROUPS_LOCK
# in its transaction: the group rows' lock serializes the claims and finishes of a group, so two
# executors cannot both take its last slot, and a finish sees every wait committed before it.

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
