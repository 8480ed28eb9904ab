-- Job events (issue 24): what happened to a job that an operator may want to be told about —
-- failed after its retries, recovered, missed, late start, overran, too fast, no success in its
-- period, skipped, cancelled. Written by the leader's health evaluator (fenced by its epoch, in
-- the transaction of its verdict); routed to notification channels by the leader's notifier,
-- which sets `routed_at` in the transaction that writes the deliveries.
CREATE TABLE IF NOT EXISTS job_events (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id       bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run_id       bigint,
    kind         text NOT NULL CHECK (kind IN ('failed', 'recovered', 'missed', 'late_start', 'overran',
                                               'too_fast', 'no_success', 'skipped', 'cancelled')),
    occurred_at  timestamptz NOT NULL,
    -- One row per fact: a re-evaluation (a new leader, a repeated scan) finds it and writes nothing.
    dedupe_key   text NOT NULL UNIQUE,
    detail       jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(detail) = 'object'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    routed_at    timestamptz
);
CREATE INDEX IF NOT EXISTS job_events_unrouted ON job_events (id) WHERE routed_at IS NULL;
CREATE INDEX IF NOT EXISTS job_events_job ON job_events (job_id, id DESC);
