-- The run lifecycle (cronos/lifecycle.py) gets its `waiting` state: a due run behind a running run
-- of its job (forbid's wait, buffer_one, buffer_all) is recorded as waiting, holds no token, lock
-- or execution slot, and is woken by its predecessor's end (cronos/store/finishes.py) instead of
-- being polled for by an executor.
DO $migration$
DECLARE
    part record;
BEGIN
    ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_state_check;
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'runs'::regclass LOOP
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT IF EXISTS runs_state_check', part.relname);
    END LOOP;
    ALTER TABLE runs ADD CONSTRAINT runs_state_check
        CHECK (state IN ('queued', 'waiting', 'running', 'completed', 'failed', 'skipped'));
END
$migration$;

-- A run not ended has no end time (runs_unfinished_id relies on it), waiting ones too.
ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_unfinished_has_no_end;
ALTER TABLE runs ADD CONSTRAINT runs_unfinished_has_no_end
    CHECK (state NOT IN ('queued', 'waiting', 'running') OR finished_at IS NULL);

-- A job's waiting runs in tick order: the finisher wakes the first, the leader's sweep reads them.
CREATE INDEX IF NOT EXISTS runs_waiting_job ON runs (job_id, scheduled_for, attempt) WHERE state = 'waiting';
-- Waiting runs no longer look for their job's earlier queued runs (executors polling in tick order).
DROP INDEX IF EXISTS runs_queued_job;
-- The claim stamps `exclusive` from the job's policy as it starts a run; inserts leave the default.
