-- Chains (Dkron's parent/child): a job names parent jobs and runs after each successful run of
-- one of them; the run it gets records the parent run (trigger `chain`).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS parents bigint[] NOT NULL DEFAULT '{}';
-- "Which jobs name this one as a parent?" (every successful finish asks): only jobs that have
-- parents are in the index, so without chains it is empty and the question costs nothing.
CREATE INDEX IF NOT EXISTS jobs_parents ON jobs USING gin (parents) WHERE parents <> '{}';

ALTER TABLE runs ADD COLUMN IF NOT EXISTS parent_run_id bigint;
-- Exactly one chain run per (parent run, child): a unique index over partitions must hold
-- scheduled_for (a chain run's tick is its parent's finish instant, written once). Its retries
-- keep the parent run: attempt tells them apart.
CREATE UNIQUE INDEX IF NOT EXISTS runs_chain_once ON runs (parent_run_id, job_id, scheduled_for, attempt)
    WHERE parent_run_id IS NOT NULL;

-- The trigger check, on runs and on each partition that has one of its own (the partition made
-- of the table before 0009 keeps its original constraint beside the inherited one).
DO $migration$
DECLARE
    part record;
BEGIN
    ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_trigger_check;
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'runs'::regclass LOOP
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT IF EXISTS runs_trigger_check', part.relname);
    END LOOP;
    ALTER TABLE runs ADD CONSTRAINT runs_trigger_check CHECK (trigger IN ('schedule', 'manual', 'retry', 'chain'));
END
$migration$;
