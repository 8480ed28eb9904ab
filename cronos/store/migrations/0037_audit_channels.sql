-- Notification channels join the audit trail (issue 24): their creations, changes and deletions
-- are recorded like a job's or a token's, secrets shown as `***` (cronos.notify.channels.shown).
-- The channel's id and name are in the entry's `detail` (a channel's history outlives it).
ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_subject_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_subject_check CHECK (subject IN ('job', 'token', 'channel'));
