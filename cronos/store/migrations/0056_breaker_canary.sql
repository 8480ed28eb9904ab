-- The circuit breaker's canary (issue 40): while the breaker holds a job paused (its revision is
-- the one the breaker's last step left), one run every M ticks goes through; the first that
-- completes resumes the job. Written by the leader only; nothing on the run path reads it.
ALTER TABLE job_breakers ADD COLUMN IF NOT EXISTS held_revision integer;  -- NULL: not held
ALTER TABLE job_breakers ADD COLUMN IF NOT EXISTS counted_from timestamptz;  -- ticks counted after this
ALTER TABLE job_breakers ADD COLUMN IF NOT EXISTS canary_run_id bigint;  -- the canary in flight
ALTER TABLE job_breakers ADD COLUMN IF NOT EXISTS canary_tick timestamptz;  -- its tick (runs' partition key)

ALTER TABLE job_events DROP CONSTRAINT IF EXISTS job_events_kind_check;
ALTER TABLE job_events ADD CONSTRAINT job_events_kind_check
    CHECK (kind IN ('failed', 'recovered', 'missed', 'late_start', 'overran', 'too_fast', 'no_success', 'skipped',
                    'cancelled', 'started', 'completed', 'ended', 'paused_by_breaker', 'canary_by_breaker',
                    'resumed_by_breaker')) NOT VALID;
ALTER TABLE job_events VALIDATE CONSTRAINT job_events_kind_check;

-- The jobs the breaker holds, read each pass: few rows.
CREATE INDEX IF NOT EXISTS job_breakers_held ON job_breakers (job_id) WHERE held_revision IS NOT NULL;
