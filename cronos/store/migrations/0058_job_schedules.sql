-- Issue 40 item 1: several schedules per job. A job fires at the union of its own schedule
-- (cron_expression, every or run_at as before: exactly one) and each entry of `schedules`:
-- [{"cron": ..., "timezone"?: ...} | {"every": ..., "anchor"?: ...}] (cronos.schedule_union).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS schedules jsonb NOT NULL DEFAULT '[]'
    CHECK (jsonb_typeof(schedules) = 'array');
-- Tick accountability reads the newest revision that set each schedule field (as 0032 for every).
CREATE INDEX IF NOT EXISTS job_revisions_schedules ON job_revisions (job_id, number) WHERE 'schedules' = ANY(fields);
