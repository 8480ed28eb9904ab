"""Run output (issue 39: cronos/run_output.py, cronos/store/run_output.py) and its partitions."""

from __future__ import annotations

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
