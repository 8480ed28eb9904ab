-- Dispatcher: which epoch pushed a queued run's token, so a leader pushes each one once.
-- NULL: never pushed (manual triggers, retries, runs due later): the leader pushes them
-- when due, watching the oldest due_at through the partial index below.
ALTER TABLE runs ADD COLUMN pushed_epoch bigint;
CREATE INDEX runs_unpushed_due ON runs (due_at) WHERE state = 'queued' AND pushed_epoch IS NULL;
