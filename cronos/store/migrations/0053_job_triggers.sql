-- Trigger URLs (issue 40, item 7): a secret per URL that lets a caller (a CI system) start a run of
-- one job without an API token. Only the secret's SHA-256 is kept (as api_tokens): a dump of this
-- table lets nobody call the hook. A signed trigger's Standard Webhooks key is the one thing kept
-- as given: an HMAC is checked with the key itself (as jobs.webhook_secret, 0005); it is never
-- listed nor audited. A revoked trigger keeps its row so the job's history still names it.
CREATE TABLE job_triggers (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    secret_hash      bytea NOT NULL UNIQUE CHECK (octet_length(secret_hash) = 32),
    signing_secret   text,
    admin            boolean NOT NULL,
    rate_per_minute  integer NOT NULL CHECK (rate_per_minute BETWEEN 1 AND 10000),
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    revoked_at       timestamptz
);
CREATE INDEX job_triggers_job ON job_triggers (job_id, id);
