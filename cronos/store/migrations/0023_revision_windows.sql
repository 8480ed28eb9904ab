-- Tick accountability reads only the revisions that touch its window (issue 22): the newest
-- revision at or before the window's start and those within it by instant, and the newest
-- revision that set each schedule field, without reading a job's whole history.
CREATE INDEX job_revisions_job_at ON job_revisions (job_id, at);
CREATE INDEX job_revisions_expression ON job_revisions (job_id, number) WHERE 'cron_expression' = ANY(fields);
CREATE INDEX job_revisions_timezone ON job_revisions (job_id, number) WHERE 'timezone' = ANY(fields);
