"""Join statements (issue 40, item 5; decided by cronos.chains, applied by cronos.store.joins):
the arrivals of parents' final outcomes per (child, logical tick), the joins' decisions, and the
leader's sweep of the joins past their deadline. The runs a join makes: runs.RUNS_JOIN."""

from __future__ import annotations

# Parents' final outcomes of a tick (one row per arrival: $1 child, $2 tick, $3 parent job, $4 its
# run, $5 its outcome, $6 the deadline if this opens the join), grouped per join so that two
# parents ending in one finish make one row; in (child, tick) order, the order every writer locks
# joins in. A join already decided takes nothing more (RETURNING omits it). The row lock it takes
# serialises two parents ending at once in two transactions: the second sees the first's arrival.
JOIN_ARRIVE = """
INSERT INTO chain_joins AS j (child_id, tick, parents, runs, outcomes, deadline)
SELECT a.child_id, a.tick, array_agg(a.parent ORDER BY a.run_id), array_agg(a.run_id ORDER BY a.run_id),
       array_agg(a.outcome ORDER BY a.run_id), min(a.deadline)
FROM unnest($1::bigint[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::text[], $6::timestamptz[])
     AS a(child_id, tick, parent, run_id, outcome, deadline)
GROUP BY a.child_id, a.tick
ORDER BY a.child_id, a.tick
ON CONFLICT (child_id, tick) DO UPDATE
SET parents = j.parents || EXCLUDED.parents, runs = j.runs || EXCLUDED.runs, outcomes = j.outcomes || EXCLUDED.outcomes
WHERE j.decided IS NULL
RETURNING j.child_id, j.tick, j.parents AS arrived, j.runs, j.outcomes
"""
# A join's decision ($3 'ran', 'skipped' or 'dropped'), its reason and the run it made (NULL:
# none), on joins not decided yet (their row locked by the caller: JOIN_ARRIVE or JOINS_DUE).
JOIN_DECIDE = """
UPDATE chain_joins j SET decided = u.decided, decided_at = clock_timestamp(), reason = u.reason, run_id = u.run_id
FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::bigint[])
     AS u(child_id, tick, decided, reason, run_id)
WHERE j.child_id = u.child_id AND j.tick = u.tick AND j.decided IS NULL
"""
# The leader's sweep (fenced): when the next pending join times out (one read of chain_joins_pending).
JOIN_NEXT_DEADLINE = "SELECT min(deadline) FROM chain_joins WHERE decided IS NULL"
# ... and the joins past their deadline, $1 at most, oldest first, locked (a finish bringing an
# arrival at this moment is left to decide it: SKIP LOCKED), with their child as it is now.
JOINS_DUE = """
SELECT j.child_id, j.tick, j.parents AS arrived, j.runs, j.outcomes, c.parents, c.chain, c.revision, c.status,
    c.misfire_grace_s
FROM chain_joins j
JOIN jobs c ON c.id = j.child_id
WHERE j.decided IS NULL AND j.deadline <= now()
ORDER BY j.deadline
LIMIT $1
FOR UPDATE OF j SKIP LOCKED
"""
# Decided joins older than $1 (the runs' retention), $2 at most (chain_joins_decided).
JOINS_FORGET = """
DELETE FROM chain_joins
WHERE (child_id, tick) IN (SELECT child_id, tick FROM chain_joins
                           WHERE decided IS NOT NULL AND decided_at < $1 ORDER BY decided_at LIMIT $2)
"""
# A child's joins, newest tick first, at most $2 (GET /api/jobs/{id}/joins: each child run
# explained by its parents' runs).
JOINS_OF_JOB = """
SELECT tick, parents, runs, outcomes, opened_at, deadline, decided, decided_at, reason, run_id
FROM chain_joins
WHERE child_id = $1
ORDER BY tick DESC
LIMIT $2
"""
