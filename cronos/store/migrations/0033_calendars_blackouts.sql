-- Business calendars, blackout windows and the timed pause (issue 25, item 2).
-- Calendars and blackouts are small tables the leader holds in memory (cronos.rules): a write
-- notifies `cronos_jobs` with op `rules` and the leader reloads them; no tick write reads them.
CREATE TABLE IF NOT EXISTS calendars (
    name        text PRIMARY KEY,
    timezone    text NOT NULL DEFAULT 'UTC',
    dates       date[] NOT NULL DEFAULT '{}',
    ranges      jsonb NOT NULL DEFAULT '[]',  -- [{"from": "YYYY-MM-DD", "to": "YYYY-MM-DD"}], inclusive
    weekdays    text[] NOT NULL DEFAULT '{}',  -- mon .. sun
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- One-off (starts_at, ends_at) or recurring (cron_expression + duration_s in timezone).
CREATE TABLE IF NOT EXISTS blackouts (
    id              bigserial PRIMARY KEY,
    name            text NOT NULL UNIQUE,
    action          text NOT NULL CHECK (action IN ('skip', 'defer')),
    starts_at       timestamptz,
    ends_at         timestamptz,
    cron_expression text,
    duration_s      integer CHECK (duration_s > 0),
    timezone        text NOT NULL DEFAULT 'UTC',
    selector        jsonb NOT NULL DEFAULT '{}',  -- {"jobs": [names], "queues": [names]}; {}: every job
    note            text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((starts_at IS NOT NULL AND ends_at IS NOT NULL AND cron_expression IS NULL AND duration_s IS NULL)
        OR (starts_at IS NULL AND ends_at IS NULL AND cron_expression IS NOT NULL AND duration_s IS NOT NULL))
);
-- A job's calendars: [{"name": ..., "mode": "exclude" | "allow"}]. A pause with an end the
-- leader lifts (paused_until), and the note the pause was given.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS calendars jsonb NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS paused_until timestamptz;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS pause_note text;
CREATE INDEX IF NOT EXISTS jobs_paused_until ON jobs (paused_until) WHERE status = 'paused' AND paused_until IS NOT NULL;
-- Their changes are audited under their own subjects (with 0037's `channel`: either may run first).
ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_subject_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_subject_check
    CHECK (subject IN ('job', 'token', 'channel', 'calendar', 'blackout'));
