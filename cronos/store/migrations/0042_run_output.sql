-- Run output (issue 39, cronos/run_output.py): the lines a run wrote -- a task's log records and
-- print()s, a shell job's stdout and stderr, an http job's response -- a row per line, numbered
-- per run (`seq`) from 0. Partitioned like `runs`, by the run's tick, with a partition for each of
-- runs' partitions, named alike (`runs_20261207` -> `run_output_20261207`): the leader creates and
-- drops both together (cronos/store/partitions.py), so output goes with its runs. No foreign key
-- to runs: a partition of a referenced table cannot be dropped while a row refers to it.
CREATE TABLE run_output (
    run_id        bigint      NOT NULL,
    scheduled_for timestamptz NOT NULL,
    seq           integer     NOT NULL,
    at            timestamptz NOT NULL,
    stream        text        NOT NULL,
    line          text        NOT NULL,
    CONSTRAINT run_output_pkey PRIMARY KEY (run_id, seq, scheduled_for)
) PARTITION BY RANGE (scheduled_for);

DO $migration$
DECLARE
    part record;
BEGIN
    FOR part IN
        SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'runs'::regclass
    LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF run_output %s',
            'run_output' || substr(part.name, length('runs') + 1), part.bound);
    END LOOP;
END
$migration$;
