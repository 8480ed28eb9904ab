-- Cancel (issue 24): a run ends `cancelled` (cronos/lifecycle.py: Event.CANCELLED, STOPPED), and
-- is never retried. A queued or waiting run is cancelled at once by the API; a running one gets a
-- request, recorded beside the run in `run_cancels`, which its executor's heartbeat reads (the
-- lease extension returns it) and honours: it signals the work, forces it after a grace, and
-- records the run `cancelled` through the ordinary finish. So neither the tick write nor the
-- finish reads or writes anything new; who cancelled is the run's error ("cancelled by ...").
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
        CHECK (state IN ('queued', 'waiting', 'running', 'completed', 'failed', 'skipped', 'cancelled'));
END
$migration$;

-- One row per cancelled run (any state it was in): who asked and when. A running run's row is
-- its executor's request; the others' are the record. Few: each is an operator's action.
CREATE TABLE IF NOT EXISTS run_cancels (
    run_id        bigint PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    scheduled_for timestamptz NOT NULL,  -- the run's tick: its partition
    requested_by  text NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS run_cancels_job ON run_cancels (job_id);
