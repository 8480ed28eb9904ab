-- Issue 40 item 2: deterministic spread as a window. Every tick of the job's repeating schedule
-- moves by an offset in [0, spread) its name picks (cronos.spread); NULL: none. Stored as `every`
-- is, in its canonical spelling (10m, 1h30m).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS spread text;
-- Tick accountability reads the newest revision that set each schedule field (as 0058 for schedules).
CREATE INDEX IF NOT EXISTS job_revisions_spread ON job_revisions (job_id, number) WHERE 'spread' = ANY(fields);
