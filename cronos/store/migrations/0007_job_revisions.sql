-- Versioned job definitions (issue 17, README "Revisions").
--
-- Every change to a job is a revision: its number (1 = creation), when, who, the job's status
-- after it, and the fields it set with their new values (secrets redacted). Pause, resume and
-- delete are revisions too (`kind`), so "was the job paused at instant T" is the status of its
-- newest revision at or before T. No foreign key: a job's revisions outlive the job.
CREATE TABLE job_revisions (
    job_id   bigint NOT NULL,
    number   integer NOT NULL CHECK (number >= 1),
    kind     text NOT NULL CHECK (kind IN ('created', 'updated', 'paused', 'resumed', 'deleted')),
    at       timestamptz NOT NULL DEFAULT now(),
    actor    text NOT NULL,
    status   text NOT NULL CHECK (status IN ('active', 'paused', 'deleted')),
    fields   text[] NOT NULL,
    changes  jsonb NOT NULL CHECK (jsonb_typeof(changes) = 'object'),
    PRIMARY KEY (job_id, number)
);

-- The job's current revision, and the revision its schedule (expression, time zone) took
-- effect in: the dispatcher writes a tick only under a revision at least this one, so a tick
-- planned under an older schedule and written after the change is refused (fenced like the epoch).
ALTER TABLE jobs ADD COLUMN revision integer NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN plan_revision integer NOT NULL DEFAULT 1;

-- Jobs that predate versioning: revision 1 is their definition at upgrade, without the payload
-- (only the application can redact its secrets).
INSERT INTO job_revisions (job_id, number, kind, at, actor, status, fields, changes)
SELECT id, 1, 'created', created_at, 'migration', status,
    ARRAY['name', 'cron_expression', 'timezone', 'kind', 'timeout_s', 'max_retries', 'retry_backoff_s',
          'concurrency_policy', 'misfire_policy', 'misfire_grace_s', 'jitter_s', 'status'],
    jsonb_build_object('name', name, 'cron_expression', cron_expression, 'timezone', timezone, 'kind', kind,
        'timeout_s', timeout_s, 'max_retries', max_retries, 'retry_backoff_s', retry_backoff_s,
        'concurrency_policy', concurrency_policy, 'misfire_policy', misfire_policy,
        'misfire_grace_s', misfire_grace_s, 'jitter_s', jitter_s, 'status', status)
FROM jobs;

-- The revision that planned each run (a retry keeps its tick's; NULL for runs before 0007).
ALTER TABLE runs ADD COLUMN revision integer;
