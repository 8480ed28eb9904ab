-- Cronos schema v1: jobs, the runs ledger, the leader epoch and its log.

CREATE TABLE jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                text NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 200),
    cron_expression     text NOT NULL,
    timezone            text NOT NULL DEFAULT 'UTC',
    kind                text NOT NULL DEFAULT 'task' CHECK (kind IN ('task', 'http', 'shell')),
    payload             jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(payload) = 'object'),
    timeout_s           double precision NOT NULL DEFAULT 300 CHECK (timeout_s > 0),
    max_retries         integer NOT NULL DEFAULT 0 CHECK (max_retries >= 0),
    retry_backoff_s     double precision NOT NULL DEFAULT 10 CHECK (retry_backoff_s >= 0),
    concurrency_policy  text NOT NULL DEFAULT 'forbid' CHECK (concurrency_policy IN ('forbid', 'allow', 'replace')),
    misfire_policy      text NOT NULL DEFAULT 'run_once' CHECK (misfire_policy IN ('run_once', 'run_all', 'skip')),
    misfire_grace_s     double precision NOT NULL DEFAULT 60 CHECK (misfire_grace_s >= 0),
    jitter_s            double precision NOT NULL DEFAULT 0 CHECK (jitter_s >= 0),
    status              text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    -- The dispatch cursor: every tick at or before it has been written to the ledger.
    last_scheduled_for  timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_status_id ON jobs (status, id);

CREATE TABLE runs (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id          bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    scheduled_for   timestamptz NOT NULL,
    attempt         integer NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    trigger         text NOT NULL CHECK (trigger IN ('schedule', 'manual', 'retry')),
    state           text NOT NULL CHECK (state IN ('queued', 'running', 'completed', 'failed', 'skipped')),
    -- When the token may be pushed: scheduled_for plus jitter, or a retry's backoff.
    due_at          timestamptz NOT NULL,
    -- Copied from the job's concurrency policy at insert: the partial unique index needs it here.
    exclusive       boolean NOT NULL DEFAULT true,
    node_id         text,
    epoch           bigint,
    lease_until     timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    duration_ms     double precision,
    error           text,
    traceback       text,
    result          text,
    skip_reason     text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT runs_tick_identity UNIQUE (job_id, scheduled_for, attempt),
    CONSTRAINT runs_skip_has_reason CHECK (state <> 'skipped' OR skip_reason IS NOT NULL)
);
-- G3: at most one running run per job whose policy forbids overlap.
CREATE UNIQUE INDEX runs_one_running_exclusive ON runs (job_id) WHERE state = 'running' AND exclusive;
CREATE INDEX runs_job_newest ON runs (job_id, id DESC);
CREATE INDEX runs_queued_due ON runs (due_at) WHERE state = 'queued';
CREATE INDEX runs_running_lease ON runs (lease_until) WHERE state = 'running';

CREATE TABLE leader_epoch (
    id          integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    epoch       bigint NOT NULL DEFAULT 0,
    holder      text,
    elected_at  timestamptz
);
INSERT INTO leader_epoch (id, epoch) VALUES (1, 0);

CREATE TABLE leader_log (
    epoch       bigint PRIMARY KEY,
    holder      text NOT NULL,
    elected_at  timestamptz NOT NULL DEFAULT now()
);
