-- A job's runs newest tick first (GET /api/jobs/{id}/runs): ordered by (scheduled_for, id), the
-- day partitions are read newest first and the scan stops in the first days that fill a page;
-- by id alone every day's partition had to be probed and merged (issue 13).
CREATE INDEX IF NOT EXISTS runs_job_tick ON runs (job_id, scheduled_for DESC, id DESC);
