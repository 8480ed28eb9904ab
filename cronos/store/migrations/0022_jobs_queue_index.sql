-- The queues jobs name (issue 22 item 7): read by a skip scan of this index, one probe per queue,
-- when the leader drops the streams of queues no job names and when a job write checks the cap
-- on their number (cronos/store/queues.py).
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (queue);
