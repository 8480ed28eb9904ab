"""API tokens, protected mode and the audit trail."""

from __future__ import annotations

# --- API tokens ----------------------------------------------------------------


# $1 name, $2 SHA-256 of the token, $3 scopes, $4 expires_at or NULL. A live token of the
# same name makes it a unique violation.
TOKEN_INSERT = """
INSERT INTO api_tokens (name, token_hash, scopes, expires_at)
VALUES ($1, $2, $3, $4)
RETURNING id, name, scopes, created_at, last_used_at, expires_at, revoked_at
"""
# Authentication: $1 SHA-256 of the presented token. The caller compares the hash again in
# constant time and reads revoked_at / expires_at itself (to say why a token is refused).
TOKEN_BY_HASH = """
SELECT id, name, scopes, created_at, last_used_at, expires_at, revoked_at, token_hash, now() AS now
FROM api_tokens
WHERE token_hash = $1
"""
# last_used_at moves at most once a minute per token: not a write per request.
TOKEN_TOUCH = """
UPDATE api_tokens
SET last_used_at = now()
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
"""
# Protected mode ends when any token can be used.
TOKEN_USABLE_EXISTS = """
SELECT EXISTS (SELECT 1 FROM api_tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))
"""
# Loopback clients may act as admin: protected mode was never closed (or was reopened by the
# operator) and no token can be used. A missing row (no migration 0020 yet) counts as closed.
TOKEN_LOCAL_ADMIN_OPEN = """
SELECT coalesce((SELECT NOT closed FROM api_protected_mode), false)
   AND NOT EXISTS (SELECT 1 FROM api_tokens
                   WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))
"""
# Run in the transaction that creates a token: protected mode never comes back by itself.
PROTECTED_MODE_CLOSE = "UPDATE api_protected_mode SET closed = true, changed_at = now() WHERE NOT closed"
# Taken first by the reopen, so a token created meanwhile is seen by its check (or closes after it).
PROTECTED_MODE_LOCK = "SELECT closed FROM api_protected_mode FOR UPDATE"
# The operator's `cronos token reopen-local`: true when it was closed.
PROTECTED_MODE_REOPEN = """
UPDATE api_protected_mode SET closed = false, changed_at = now() WHERE closed RETURNING true
"""
TOKEN_LIST = """
SELECT id, name, scopes, created_at, last_used_at, expires_at, revoked_at
FROM api_tokens
WHERE revoked_at IS NULL
ORDER BY name
"""
TOKEN_REVOKE = """
UPDATE api_tokens
SET revoked_at = now()
WHERE name = $1 AND revoked_at IS NULL
RETURNING id, name, scopes, created_at, last_used_at, expires_at, revoked_at
"""


# --- audit trail ---------------------------------------------------------------


# $1 actor, $2 subject ('job' | 'token'), $3 action, $4 job id, $5 token name, $6 before,
# $7 after, $8 detail (jsonb or NULL each). Run in the transaction of the change it records.
AUDIT_INSERT = """
INSERT INTO audit_log (actor, subject, action, job_id, token_name, before, after, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
"""
# Newest first. $1 job id, $2 last id seen or NULL, $3 limit.
# $4: the value bound of the list views (cronos_brief, as REVISIONS_OF_JOB).
AUDIT_OF_JOB = """
SELECT page.*, octet_length(to_jsonb(page)::text) AS size
FROM (SELECT id, at, actor, subject, action, job_id, token_name, cronos_brief(before, $4) AS before,
             cronos_brief(after, $4) AS after, cronos_brief(detail, $4) AS detail
      FROM audit_log
      WHERE job_id = $1 AND ($2::bigint IS NULL OR id < $2)
      ORDER BY id DESC
      LIMIT $3) AS page
ORDER BY id DESC
"""
AUDIT_JOB_KNOWN = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1) OR EXISTS (SELECT 1 FROM audit_log WHERE job_id = $1)
"""
# Newest first. $1 subject, $2 last id seen or NULL, $3 limit.
AUDIT_OF_SUBJECT = """
SELECT id, at, actor, subject, action, job_id, token_name, before, after, detail
FROM audit_log
WHERE subject = $1 AND ($2::bigint IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3
"""


# --- console sessions (OpenID Connect sign-in) ----------------------------------

# $1 SHA-256 of the session id, $2 actor, $3 subject, $4 scopes, $5 groups, $6 lifetime in seconds.
SESSION_INSERT = """
INSERT INTO console_sessions (id_hash, actor, subject, scopes, groups, expires_at)
VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))
"""
# Every request: the live session of this hash (none once ended or expired).
SESSION_BY_HASH = """
SELECT id_hash, actor, subject, scopes, groups, created_at, expires_at
FROM console_sessions
WHERE id_hash = $1 AND expires_at > now()
"""
SESSION_DELETE = "DELETE FROM console_sessions WHERE id_hash = $1 RETURNING actor"
# Sign-ins sweep what has ended, theirs and the unfinished ones: the tables stay small.
SESSIONS_EXPIRED_DELETE = "DELETE FROM console_sessions WHERE expires_at <= now()"
LOGINS_EXPIRED_DELETE = "DELETE FROM oidc_logins WHERE expires_at <= now()"
# $1 SHA-256 of the state, $2 nonce, $3 PKCE verifier, $4 lifetime in seconds.
LOGIN_INSERT = """
INSERT INTO oidc_logins (state_hash, nonce, code_verifier, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
"""
# The callback consumes its sign-in once, live or not (a replay finds nothing).
LOGIN_TAKE = """
DELETE FROM oidc_logins WHERE state_hash = $1
RETURNING nonce, code_verifier, expires_at > now() AS live
"""
