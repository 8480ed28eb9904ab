-- Backfill (issue 25, item 3): runs queued for past ticks of a job's schedule keep their tick's
-- identity and say how they came (trigger `backfill`). The trigger check, as 0016 did for `chain`.
DO $migration$
DECLARE
    part record;
BEGIN
    ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_trigger_check;
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'runs'::regclass LOOP
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT IF EXISTS runs_trigger_check', part.relname);
    END LOOP;
    ALTER TABLE runs ADD CONSTRAINT runs_trigger_check
        CHECK (trigger IN ('schedule', 'manual', 'retry', 'chain', 'backfill'));
END
$migration$;

-- Labels and owner (issue 25, item 4): a key=value map and a free-text owner per job. Selectors
-- (cronos.selectors) are answered with jsonb containment (@>) and key existence (?, ?&), which
-- this GIN index serves (jsonb_ops: both operators).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS labels jsonb NOT NULL DEFAULT '{}';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS owner text;
CREATE INDEX IF NOT EXISTS jobs_labels ON jobs USING gin (labels);
