-- A job's runs that have not started (queued or waiting), by due time (issue 38): the leader's
-- tick write reads whether a job of the default policies holds one that is overdue
-- (cronos.lifecycle.one_pending), one probe per tick (index only: the epoch that wrote it is
-- included), however many runs other jobs hold.
-- An entry per queued run, none once it starts (a claim's new row version leaves the predicate).
CREATE INDEX IF NOT EXISTS runs_pending_job ON runs (job_id, due_at) INCLUDE (epoch) WHERE state IN ('queued', 'waiting');
