-- The queued runs by due time, then id: the leader's re-push (on election, or when Redis lost
-- its data) walks them a page at a time keyset-paged by (due_at, id), in due order, reading
-- only the page; the due-time scans (expiry, backlog count) use its first column as before.
CREATE INDEX runs_queued_due_id ON runs (due_at, id) WHERE state = 'queued';
DROP INDEX runs_queued_due;
