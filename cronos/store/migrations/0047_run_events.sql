-- Start and end events (issue 39): `started`, `completed` and `ended` join the job events a channel
-- may ask for. The leader derives them only for the jobs some enabled channel asks them of
-- (dispatcher/health.py): no statement on the claim or finish path, nothing for other jobs.
ALTER TABLE job_events DROP CONSTRAINT IF EXISTS job_events_kind_check;
ALTER TABLE job_events ADD CONSTRAINT job_events_kind_check
    CHECK (kind IN ('failed', 'recovered', 'missed', 'late_start', 'overran', 'too_fast', 'no_success', 'skipped',
                    'cancelled', 'started', 'completed', 'ended')) NOT VALID;
ALTER TABLE job_events VALIDATE CONSTRAINT job_events_kind_check;
