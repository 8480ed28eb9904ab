-- Issue 14 item 6: windows and one-offs; item 5: a per-job catch-up pace.
-- A job fires no tick before start_at nor after end_at; after max_runs scheduled runs it ends; a
-- one-off names run_at instead of a cron expression (exactly one of the two) and runs once.
-- A job that ended is `completed` (its window is over, its runs done) or `expired` (a one-off
-- whose instant passed without a run, a job created past its window): the leader sets it when it
-- writes the last tick, the API when a job is created already past its window.
ALTER TABLE jobs ALTER COLUMN cron_expression DROP NOT NULL;
ALTER TABLE jobs ADD COLUMN run_at timestamptz;
ALTER TABLE jobs ADD COLUMN start_at timestamptz;
ALTER TABLE jobs ADD COLUMN end_at timestamptz;
ALTER TABLE jobs ADD COLUMN max_runs integer CHECK (max_runs > 0);
-- Scheduled runs written so far (queued ticks, not skips), moved with the cursor: max_runs counts them.
ALTER TABLE jobs ADD COLUMN scheduled_runs integer NOT NULL DEFAULT 0;
-- Late runs of this job's catch-up at most this many a second (NULL: only CRONOS_CATCHUP_MAX_PER_S).
ALTER TABLE jobs ADD COLUMN catchup_max_per_s double precision CHECK (catchup_max_per_s > 0);
ALTER TABLE jobs ADD CONSTRAINT jobs_schedule_or_run_at CHECK ((cron_expression IS NULL) <> (run_at IS NULL));
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN ('active', 'paused', 'completed', 'expired'));
ALTER TABLE job_revisions DROP CONSTRAINT IF EXISTS job_revisions_status_check;
ALTER TABLE job_revisions ADD CONSTRAINT job_revisions_status_check
    CHECK (status IN ('active', 'paused', 'deleted', 'completed', 'expired'));
-- The leader ending a job is a revision too (kind `ended`, actor `dispatcher`): "was the job
-- still running at instant T" stays the status of its newest revision at or before T.
ALTER TABLE job_revisions DROP CONSTRAINT IF EXISTS job_revisions_kind_check;
ALTER TABLE job_revisions ADD CONSTRAINT job_revisions_kind_check
    CHECK (kind IN ('created', 'updated', 'paused', 'resumed', 'deleted', 'ended'));
