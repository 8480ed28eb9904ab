-- Channels hear of the jobs a label selector picks (issue 25, item 4), besides all jobs, the jobs
-- listed or the jobs of the queues listed: the selector's text (cronos.selectors), NULL: none.
-- The router reads the jobs' labels with their events (cronos.notify.rules.applies).
ALTER TABLE notification_channels ADD COLUMN IF NOT EXISTS selector text;
