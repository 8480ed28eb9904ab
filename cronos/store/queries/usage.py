"""Run usage (issue 39: cronos/run_usage.py, cronos/store/run_usage.py) and its partitions."""

from __future__ import annotations

# --- run usage (issue 39: cronos/run_usage.py) ---------------------------------------------------

# Written in the finish's transaction, after FINISH_RUNS, for the runs it recorded that an executor
# measured: one statement for the batch, none when no run of it was measured (a reaped run). A
# plain insert: FINISH_RUNS returns a run once ever (it ends only an unfinished run, under its row
# lock), so no row is there already; an ON CONFLICT clause, a second look in the key and a
# speculative insert a row, cost as much again (1,368 / 2,573 buffers, 605 / 904 WAL records for
# 300 rows, 2026-12-07).
USAGE_WRITE = """
INSERT INTO run_usage (run_id, scheduled_for, wall_ms, cpu_ms, cpu_user_ms, cpu_sys_ms, max_rss_bytes)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::float8[], $4::float8[], $5::float8[], $6::float8[],
    $7::bigint[])
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
