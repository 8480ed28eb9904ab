-- Backfills bounded per caller (issue 36): the API counts a token's backfills still releasing runs
-- from their audit entries (cronos.store.queries.BACKFILLS_ACTIVE); this finds them by actor
-- without reading the audit log of every job.
CREATE INDEX IF NOT EXISTS audit_log_backfill_actor ON audit_log (actor, id DESC) WHERE action = 'backfilled';
