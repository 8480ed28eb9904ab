-- Notifications (issue 24): channels defined once, each with the rule that picks its events, and
-- the outbox of deliveries the leader sends (dispatcher/notifier.py).
--
-- A channel's `config` is what the API shows (a webhook's URL, an SMTP server and its addresses);
-- `secrets` is write-only (a webhook's signing secret, a Slack incoming-webhook URL, an SMTP
-- password): read by the leader to send, never returned by the API, never logged or audited.
CREATE TABLE IF NOT EXISTS notification_channels (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text NOT NULL UNIQUE,
    kind            text NOT NULL CHECK (kind IN ('webhook', 'slack', 'email')),
    config          jsonb NOT NULL DEFAULT '{}'::jsonb,
    secrets         jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- What it applies to: both NULL, every job; else the jobs listed, or the jobs of the queues listed.
    job_ids         bigint[],
    queues          text[],
    events          text[] NOT NULL,
    after_failures  integer NOT NULL DEFAULT 1 CHECK (after_failures >= 1),
    rate_limit_s    integer NOT NULL DEFAULT 0 CHECK (rate_limit_s >= 0),
    -- {"start": "22:00", "end": "07:00", "timezone": "Europe/Paris", "hold": true} or NULL.
    quiet_hours     jsonb,
    enabled         boolean NOT NULL DEFAULT true,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- The outbox: one row per (channel, event) the router matched, written in the transaction that
-- marks the event routed (fenced by the leader's epoch). `pending` rows are claimed by the
-- sender with a lease (`lease_until`) before it sends, so a new leader does not send one again
-- while the lease runs; `sent` and `failed` (gave up after its attempts) are marked fenced and
-- only from `pending`. `suppressed` rows record a rule's decision (below the failure threshold,
-- rate limited, quiet hours) so an operator sees why nothing was sent.
CREATE TABLE IF NOT EXISTS notification_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel_id   bigint NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
    event_id     bigint REFERENCES job_events (id) ON DELETE SET NULL,
    job_id       bigint,
    kind         text NOT NULL,  -- the event's kind, or 'test'
    occurred_at  timestamptz NOT NULL,
    message      jsonb NOT NULL,  -- the notification as sent (cronos.notify.message), no secret in it
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed', 'suppressed')),
    reason       text,  -- why suppressed
    due_at       timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    lease_until  timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    sent_at      timestamptz,
    UNIQUE (channel_id, event_id)
);
CREATE INDEX IF NOT EXISTS notification_deliveries_due ON notification_deliveries (due_at) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS notification_deliveries_channel ON notification_deliveries (channel_id, id DESC);
-- The rate limit's fact: a channel's last notification about a job.
CREATE INDEX IF NOT EXISTS notification_deliveries_job ON notification_deliveries (channel_id, job_id, occurred_at DESC)
    WHERE state <> 'suppressed';
