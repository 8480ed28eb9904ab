-- Jobs kept in step with a file by `cronos apply` (README "Jobs as code"): {"tool": ..., "secrets_digest": ...}.
-- NULL for jobs made any other way; `cronos apply --prune` deletes only jobs that carry it.
ALTER TABLE jobs ADD COLUMN managed_by jsonb;
