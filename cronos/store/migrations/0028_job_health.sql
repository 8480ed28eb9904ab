-- Expectations per job and its health (issue 24 item 2): the dead-man's switch built in.
--
-- `jobs.expectations`: the job's expectations ({start_within_s, finish_within_s, not_faster_than_s,
-- success_every_s}, each optional; NULL: none). A revision that sets them records them, so a run
-- is judged by the expectations of the revision that planned it (an edit raises no false alarm).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS expectations jsonb
    CHECK (expectations IS NULL OR jsonb_typeof(expectations) = 'object');
-- The leader's health evaluator walks the runs of these jobs only.
CREATE INDEX IF NOT EXISTS jobs_expecting ON jobs (id) WHERE expectations IS NOT NULL;
-- The expectations in force at a revision: the newest revision at or before it that set them.
CREATE INDEX IF NOT EXISTS job_revisions_expectations ON job_revisions (job_id, number)
    WHERE 'expectations' = ANY(fields);

-- Runs that ended otherwise than completed, by end time: the evaluator's scan for failed,
-- skipped and cancelled runs. Completed runs (nearly all of them) get no entry: the finish
-- statement and the tick write keep their cost.
CREATE INDEX IF NOT EXISTS runs_unhappy_finished ON runs (finished_at, id)
    WHERE state IN ('failed', 'skipped', 'cancelled');

-- One row per job the evaluator has judged (a job without one: no failure or expectation seen).
CREATE TABLE IF NOT EXISTS job_health (
    job_id               bigint PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    verdict              text NOT NULL DEFAULT 'unknown'
                         CHECK (verdict IN ('ok', 'late', 'failing', 'overrunning', 'missing', 'unknown')),
    reason               text,
    consecutive_failures integer NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    last_success_at      timestamptz,
    last_failure_at      timestamptz,
    -- With last_failure_at: the newest failure counted, so a re-scan counts none twice.
    last_failure_run_id  bigint,
    -- The newest tick the auditor found missed (verdict `missing` until a success after it).
    missed_at            timestamptz,
    -- Expectations: every run of the job with an id up to this one has been judged for good.
    judged_run_id        bigint NOT NULL DEFAULT 0,
    updated_at           timestamptz NOT NULL DEFAULT now()
);
-- Rows the evaluator looks at again each pass (a verdict to clear when its cause ends).
CREATE INDEX IF NOT EXISTS job_health_watched ON job_health (job_id) WHERE verdict <> 'ok';

-- How far the evaluator's scan of runs_unhappy_finished went (one row; a new leader goes on from it).
CREATE TABLE IF NOT EXISTS health_scan (
    id          integer PRIMARY KEY CHECK (id = 1),
    scanned_to  timestamptz NOT NULL
);
INSERT INTO health_scan (id, scanned_to) VALUES (1, now()) ON CONFLICT DO NOTHING;
