-- Namespaces (issue 41, item 1): every job belongs to one; `default` holds what existed before,
-- and every request that names none, so single-team use is unchanged. A name is a DNS label (it
-- goes in URLs, CLI flags and file keys as it is). Names of jobs are unique within a namespace.
CREATE TABLE IF NOT EXISTS namespaces (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO namespaces (name) VALUES ('default') ON CONFLICT (name) DO NOTHING;

-- A constant default: PostgreSQL records it in the catalog, no row is rewritten.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS namespace text NOT NULL DEFAULT 'default';
-- Added NOT VALID then validated: the check reads the jobs once, under a lock that lets reads go on.
ALTER TABLE jobs ADD CONSTRAINT jobs_namespace_fkey FOREIGN KEY (namespace) REFERENCES namespaces (name) NOT VALID;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_namespace_fkey;

-- Unique within a namespace (was: across the cluster). The index also serves a listing of one
-- namespace by name; jobs_namespace_id a page of one namespace by id (GET /api/jobs?namespace=).
-- Each build reads the jobs once (about a second a million jobs), while job writes wait.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_namespace_name ON jobs (namespace, name);
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_name_key;
CREATE INDEX IF NOT EXISTS jobs_namespace_id ON jobs (namespace, id);

-- Namespaces' creations and deletions are audited (with 0033's and 0037's subjects).
ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_subject_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_subject_check
    CHECK (subject IN ('job', 'token', 'channel', 'calendar', 'blackout', 'namespace')) NOT VALID;
