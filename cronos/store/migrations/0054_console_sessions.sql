-- Console sign-in with OpenID Connect (docs/sign-in.md).
--
-- A session is stored only as the SHA-256 of its id (the cookie's value), as api_tokens: a dump of
-- this table signs nobody in. Every request looks its session up (no cache), so signing out or
-- ending a session holds at once on every API replica. `scopes` are what the person's groups
-- granted at sign-in; `actor` names them in the audit trail (oidc:<email or subject>).
CREATE TABLE console_sessions (
    id_hash     bytea PRIMARY KEY CHECK (octet_length(id_hash) = 32),
    actor       text NOT NULL CHECK (char_length(actor) BETWEEN 1 AND 300),
    subject     text NOT NULL,
    scopes      text[] NOT NULL CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['read', 'write', 'admin']),
    groups      text[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- A sign-in under way: the browser went to the provider with this state (its SHA-256 kept), nonce
-- and PKCE verifier. The callback consumes the row once; it is refused after expires_at.
CREATE TABLE oidc_logins (
    state_hash     bytea PRIMARY KEY CHECK (octet_length(state_hash) = 32),
    nonce          text NOT NULL,
    code_verifier  text NOT NULL,
    expires_at     timestamptz NOT NULL
);
CREATE INDEX oidc_logins_expiry ON oidc_logins (expires_at);
