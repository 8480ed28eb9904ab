-- One expiry rule (issue 38, item 2): a run's expiry instant, the end of its misfire grace, is
-- stamped once, when the run is created (cronos.lifecycle.expiry: its due time plus its job's
-- grace, at least a second), and every judgement of lateness (the leader's outbox, the claim, the
-- executor's token, the reaper) compares an instant with it; no statement recomputes a grace.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS expires_at timestamptz;

-- Runs not ended yet get the instant the code before this one judged them by (the run's due time
-- plus its job's grace, at least a second): written here once, as lifecycle.expiry does for new
-- runs. Ended runs keep none: nothing judges their lateness again. One statement per partition,
-- each reading only its own unfinished runs (runs_unfinished_id's predicate).
DO $migration$
DECLARE
    part record;
BEGIN
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'runs'::regclass ORDER BY c.relname LOOP
        EXECUTE format(
            'UPDATE %I r SET expires_at = r.due_at + make_interval(secs => greatest(j.misfire_grace_s, 1))
             FROM jobs j WHERE j.id = r.job_id AND r.finished_at IS NULL AND r.expires_at IS NULL', part.relname);
    END LOOP;
END
$migration$;

-- The reaper reads queued runs by their expiry (EXPIRE_PENDING): the ones past it first, whatever
-- each job's grace; the ones not stamped yet (written by a leader of the release before, during a
-- rolling upgrade) sort last and are stamped by the reaper (RUNS_UNSTAMPED). Queued runs only:
-- an index that held the waiting ones too was taken, with stale statistics, for the statements
-- that read a job's waiting runs (each then read the whole backlog), which have their own.
CREATE INDEX IF NOT EXISTS runs_queued_expiry ON runs (expires_at) WHERE state = 'queued';

-- The tick write's probe of a job's pending run (one_pending) reads whether it has expired from
-- the index alone, as it read its due time.
DROP INDEX IF EXISTS runs_pending_job;
CREATE INDEX IF NOT EXISTS runs_pending_job ON runs (job_id, due_at) INCLUDE (epoch, expires_at)
    WHERE state IN ('queued', 'waiting');
