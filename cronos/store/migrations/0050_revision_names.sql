-- Issue 40 item 2: an `H` in a cron expression takes the values the job's name picks (cronos.hashed),
-- so a job's name is part of its schedule. Tick accountability reads the newest revision that set
-- it, as it reads the other schedule fields (0023, 0032).
CREATE INDEX job_revisions_name ON job_revisions (job_id, number) WHERE 'name' = ANY(fields);
