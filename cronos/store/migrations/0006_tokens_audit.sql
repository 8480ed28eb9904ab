-- API tokens and the audit trail (README "Security").
--
-- A token is stored only as the SHA-256 of its text: whoever reads this table cannot call
-- the API. A revoked token keeps its row (revoked_at set) so its history still names it;
-- a name is unique among the tokens not revoked, so a revoked name may be reused.
CREATE TABLE api_tokens (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    token_hash    bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    scopes        text[] NOT NULL CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['read', 'write', 'admin']),
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    expires_at    timestamptz,
    revoked_at    timestamptz
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;

-- Who changed what, when, with the job's fields before and after (secrets redacted).
-- No foreign key: a job's history outlives the job.
CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL,
    subject     text NOT NULL CHECK (subject IN ('job', 'token')),
    action      text NOT NULL,
    job_id      bigint,
    token_name  text,
    before      jsonb,
    after       jsonb,
    detail      jsonb
);
CREATE INDEX audit_log_job ON audit_log (job_id, id DESC) WHERE job_id IS NOT NULL;
CREATE INDEX audit_log_subject ON audit_log (subject, id DESC);
