-- Protected mode fails closed (README "Security"): once a token has existed, loopback clients no
-- longer act as admin when the last token expires or is revoked. `closed` is set in the
-- transaction that creates a token (cronos/store/tokens.py) and cleared only by the operator's
-- `cronos token reopen-local` (audited). One row, always present.
CREATE TABLE api_protected_mode (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    closed      boolean NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now()
);
-- A deployment that already had tokens (revoked and expired ones keep their rows) stays closed.
INSERT INTO api_protected_mode (closed) SELECT EXISTS (SELECT 1 FROM api_tokens);
