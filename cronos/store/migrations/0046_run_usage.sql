-- Run usage (issue 39, cronos/run_usage.py): what one run's work used -- its wall time, its CPU
-- time, and for a shell run the user and system parts and the peak resident memory of its
-- processes. A row per run that an executor measured, written in the transaction that records
-- the run's end (cronos/store/finishes.py), by a statement of its own: the finish's statement
-- keeps its columns. Partitioned like `runs` and `run_output`, a partition for each of runs'
-- partitions, named alike (`runs_20261207` -> `run_usage_20261207`): the leader creates and drops
-- the three together (cronos/store/partitions.py). No foreign key to runs, as run_output.
CREATE TABLE run_usage (
    run_id        bigint           NOT NULL,
    scheduled_for timestamptz      NOT NULL,
    wall_ms       double precision NOT NULL,
    cpu_ms        double precision,
    cpu_user_ms   double precision,
    cpu_sys_ms    double precision,
    max_rss_bytes bigint,
    CONSTRAINT run_usage_pkey PRIMARY KEY (run_id, scheduled_for)
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
        EXECUTE format('CREATE TABLE %I PARTITION OF run_usage %s',
            'run_usage' || substr(part.name, length('runs') + 1), part.bound);
    END LOOP;
END
$migration$;
