-- Queues (issue 14 item 7): a job names the queue whose executors run it; one Redis stream per
-- queue. A run's queue is read from its job when its token is pushed (a join by primary key),
-- not copied onto runs: no column on the partitioned table, and a run queued before its job
-- moved to another queue follows the job. Existing jobs keep today's one stream, `default`.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default';
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_queue_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_queue_check CHECK (queue ~ '^[A-Za-z0-9_-]{1,64}$');
