"""The cluster's own upkeep: liveness, leader epoch, runs partitions, the reconciliation
auditor, the cluster identity."""

from __future__ import annotations

# A liveness probe, which also reads PostgreSQL's clock (unix time): the clock due times are
# judged by (cronos.clock).
PING = "SELECT extract(epoch FROM clock_timestamp())::float8"


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
SELECT j.cron_expression, j.timezone, j.run_at, j.start_at, j.end_at, j.every, j.anchor, j.schedules, j.spread,
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
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
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


# --- cluster identity ---------------------------------------------------------

# The id migration 0024 made once (cronos/store/identity.py).
CLUSTER_IDENTITY = "SELECT id::text FROM cluster_identity"
