-- Temporal's buffered overlap policies: a tick whose predecessor still runs waits for it
-- (buffer_all), or only one such tick waits and later ones are skipped (buffer_one).
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_concurrency_policy_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_concurrency_policy_check
    CHECK (concurrency_policy IN ('forbid', 'allow', 'replace', 'buffer_one', 'buffer_all'));
-- Waiting runs start in tick order: "is an earlier run of this job still queued?" reads only
-- the (few) queued rows of the job, not its whole history.
CREATE INDEX IF NOT EXISTS runs_queued_job ON runs (job_id, scheduled_for, attempt) WHERE state = 'queued';
