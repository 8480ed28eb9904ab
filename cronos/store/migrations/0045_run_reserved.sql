-- The run lifecycle (cronos/lifecycle.py) gets its `reserved` state: an executor that holds a
-- run's token ahead of its due time (the push lead) claims it then (Event.RESERVED: its node, its
-- lease, its G3 row), and at the due instant starts it without a round trip; the run becomes
-- `running` with its started_at by a later write (Event.STARTED) or with its finish. A reserved
-- run is owned and leased like a running one: the reaper ends it "executor lost" when its executor
-- is gone, and it holds its exclusive job's one place (runs_running_exclusive).
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
        CHECK (state IN ('queued', 'waiting', 'reserved', 'running', 'completed', 'failed', 'skipped', 'cancelled'));
END
$migration$;

ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_unfinished_has_no_end;
ALTER TABLE runs ADD CONSTRAINT runs_unfinished_has_no_end
    CHECK (state NOT IN ('queued', 'waiting', 'reserved', 'running') OR finished_at IS NULL);

-- The reaper reads runs owned by an executor (reserved or running) by the end of their lease.
DROP INDEX IF EXISTS runs_running_lease;
CREATE INDEX IF NOT EXISTS runs_owned_lease ON runs (lease_until) WHERE state IN ('reserved', 'running');

-- G3: a reserved exclusive run holds its job's one place as a running one does.
CREATE OR REPLACE FUNCTION cronos_runs_running_exclusive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state IN ('reserved', 'running') AND OLD.exclusive THEN
        DELETE FROM runs_running_exclusive WHERE job_id = OLD.job_id AND run_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state IN ('reserved', 'running') AND NEW.exclusive THEN
        INSERT INTO runs_running_exclusive (job_id, run_id) VALUES (NEW.job_id, NEW.id);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS runs_running_exclusive_insert ON runs;
DROP TRIGGER IF EXISTS runs_running_exclusive_update ON runs;
DROP TRIGGER IF EXISTS runs_running_exclusive_delete ON runs;
CREATE TRIGGER runs_running_exclusive_insert AFTER INSERT ON runs FOR EACH ROW
    WHEN (NEW.state IN ('reserved', 'running') AND NEW.exclusive) EXECUTE FUNCTION cronos_runs_running_exclusive();
-- reserved -> running keeps the row: only the changes in and out of "owned exclusive" fire.
CREATE TRIGGER runs_running_exclusive_update AFTER UPDATE OF state, exclusive ON runs FOR EACH ROW
    WHEN ((OLD.state IN ('reserved', 'running') AND OLD.exclusive)
          IS DISTINCT FROM (NEW.state IN ('reserved', 'running') AND NEW.exclusive))
    EXECUTE FUNCTION cronos_runs_running_exclusive();
CREATE TRIGGER runs_running_exclusive_delete AFTER DELETE ON runs FOR EACH ROW
    WHEN (OLD.state IN ('reserved', 'running') AND OLD.exclusive) EXECUTE FUNCTION cronos_runs_running_exclusive();
