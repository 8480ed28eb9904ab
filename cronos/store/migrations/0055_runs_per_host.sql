-- Runs on every host (issue 40): a job with `hosts` set runs once per chosen executor per tick, each
-- run its own row naming its host. The tick's identity becomes (job, tick, attempt, host), a NULL
-- host (every other run) counting as one value: G1 holds per host, and as before for the rest.
-- jobs.hosts NULL: one run per tick (cronos.every_host reads the object).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS hosts jsonb CHECK (hosts IS NULL OR jsonb_typeof(hosts) = 'object');
ALTER TABLE runs ADD COLUMN IF NOT EXISTS host text;
ALTER TABLE runs DROP CONSTRAINT runs_tick_identity,
    ADD CONSTRAINT runs_tick_identity UNIQUE NULLS NOT DISTINCT (job_id, scheduled_for, attempt, host);
