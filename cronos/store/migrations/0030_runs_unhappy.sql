-- All runs, one view (GET /api/runs, issue 24): the runs an operator looks for — ended failed,
-- skipped or cancelled (0026) — newest first, across jobs and per job. Partial, so a run enters
-- them only when it ends in one of these states: a tick write, a claim, a heartbeat and a completed
-- finish insert nothing here; a failed (or skipped, cancelled) end inserts one entry in each.
-- Every other filter of the view pages the primary key or runs_job_newest, with a bounded scan
-- (cronos.store.run_views), and needs no index of its own.
CREATE INDEX IF NOT EXISTS runs_unhappy_newest ON runs (id DESC) WHERE state IN ('failed', 'skipped', 'cancelled');
CREATE INDEX IF NOT EXISTS runs_unhappy_job ON runs (job_id, id DESC) WHERE state IN ('failed', 'skipped', 'cancelled');
