-- Run now with inputs (issue 24, item 5): the payload overrides of a manual run, kept beside the
-- ledger so the hot statements (writing ticks, recording a finish) stay as they are. One row per
-- manual run that carries inputs or re-runs a past tick, written by the API with the run; the
-- executor reads it only for manual runs and retries (cronos.inputs.INPUT_TRIGGERS): an attempt
-- runs with the overrides of the newest row of its tick at or before it, so a retry keeps its
-- run's inputs and a later re-run without overrides (payload NULL) ends them.
-- `payload` is a JSON Merge Patch (RFC 7396) of the job's payload, checked to hold no secret
-- (cronos.inputs.check_overrides). No foreign key to `runs` (partitioned by day; retention drops
-- whole days): a row outlives its run's day at most until its job is deleted.
CREATE TABLE IF NOT EXISTS run_inputs (
    job_id        bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    scheduled_for timestamptz NOT NULL,
    attempt       integer NOT NULL CHECK (attempt >= 1),
    run_id        bigint NOT NULL,
    kind          text NOT NULL,  -- the job's kind when the inputs were checked (how to redact them)
    payload       jsonb CHECK (payload IS NULL OR jsonb_typeof(payload) = 'object'),
    actor         text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, scheduled_for, attempt)
);
