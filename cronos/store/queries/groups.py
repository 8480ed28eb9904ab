"""Concurrency groups (cronos.store.groups; migration 0036): their slots, their lock, and the
API's writes and reads of them."""

from __future__ import annotations

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
# The API's view and edits of groups (cronos.store.group_admin). A group with the slots held (by
# runs queued or running), the runs waiting for it and the jobs naming it; $1 one name or NULL: all.
GROUPS_LIST = """
SELECT g.name, g.run_limit, g.created_at, g.updated_at, g.namespace,
       (SELECT count(*) FROM concurrency_group_slots s WHERE s.group_name = g.name
          AND EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id AND r.finished_at IS NULL
                      AND r.state IN ('queued', 'running')))::integer AS holding,
       (SELECT count(*) FROM runs w WHERE w.state = 'waiting' AND w.waiting_for = g.name)::integer AS waiting,
       (SELECT count(*) FROM jobs j WHERE j.concurrency_group = g.name)::integer AS jobs
FROM concurrency_groups g WHERE ($1::text IS NULL OR g.name = $1) AND ($2::text IS NULL OR g.namespace = $2)
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
# Create the group $1 with the limit $2 in namespace $3, or set its limit; `created` tells which.
# No row: the group exists in another namespace (names are unique across the cluster).
GROUP_PUT = """
INSERT INTO concurrency_groups AS g (name, run_limit, namespace) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET run_limit = excluded.run_limit,
    updated_at = CASE WHEN g.run_limit = excluded.run_limit THEN g.updated_at ELSE now() END
WHERE g.namespace = excluded.namespace
RETURNING name, run_limit, created_at, updated_at, xmax = 0 AS created
"""
GROUP_DELETE = "DELETE FROM concurrency_groups WHERE name = $1 RETURNING name"
