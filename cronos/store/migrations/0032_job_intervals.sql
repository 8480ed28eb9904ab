-- Issue 25 item 1: interval schedules. A job fires at anchor + k·every (elapsed time, cronos.interval)
-- instead of at a cron expression's or a one-off's instants: exactly one of the three. `every` is
-- stored in its canonical spelling (`1h30m`), so jobs with the same interval compare equal; a NULL
-- anchor is the Unix epoch. cron_expression has been nullable since 0014 (one-offs): a reader that
-- sees NULL there already asks run_at, and now `every`, what the job's schedule is.
ALTER TABLE jobs ADD COLUMN every text CHECK (every ~ '^([1-9][0-9]*d)?([1-9][0-9]*h)?([1-9][0-9]*m)?([1-9][0-9]*s)?$'
    AND every <> '');
ALTER TABLE jobs ADD COLUMN anchor timestamptz;
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_schedule_or_run_at;
ALTER TABLE jobs ADD CONSTRAINT jobs_one_schedule CHECK (num_nonnulls(cron_expression, run_at, every) = 1);
ALTER TABLE jobs ADD CONSTRAINT jobs_anchor_of_every CHECK (anchor IS NULL OR every IS NOT NULL);
-- Tick accountability reads the newest revision that set each schedule field (as 0014 for the others).
CREATE INDEX job_revisions_every ON job_revisions (job_id, number) WHERE 'every' = ANY(fields);
CREATE INDEX job_revisions_anchor ON job_revisions (job_id, number) WHERE 'anchor' = ANY(fields);
