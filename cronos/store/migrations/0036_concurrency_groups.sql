-- Concurrency groups (issue 25, item 5): "at most two of the warehouse jobs at a time". A job may
-- name a group; a run of it starts only while it holds one of the group's `run_limit` slots.
-- A slot is a row of concurrency_group_slots, taken under the group row's lock (FOR NO KEY UPDATE) by the
-- claim that starts the run, or handed by a finish to the group's first waiting run as it wakes
-- it; a slot counts while its run is queued or running (a run ended by any path frees it at once,
-- and the leader's sweep deletes the row). Jobs without a group never read these tables.
CREATE TABLE concurrency_groups (
    name        text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    run_limit   integer NOT NULL CHECK (run_limit BETWEEN 1 AND 100000),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- A group in use cannot be deleted (RESTRICT); the API answers 409.
ALTER TABLE jobs ADD COLUMN concurrency_group text REFERENCES concurrency_groups (name) ON DELETE RESTRICT;
CREATE INDEX jobs_concurrency_group ON jobs (concurrency_group) WHERE concurrency_group IS NOT NULL;

CREATE TABLE concurrency_group_slots (
    run_id         bigint PRIMARY KEY,
    group_name     text NOT NULL REFERENCES concurrency_groups (name) ON DELETE CASCADE,
    job_id         bigint NOT NULL,
    scheduled_for  timestamptz NOT NULL,
    granted_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX concurrency_group_slots_group ON concurrency_group_slots (group_name);

-- The group a waiting run waits for (NULL: it waits behind its job's running run); kept after it
-- is woken, so a run shows the group it waited for.
ALTER TABLE runs ADD COLUMN waiting_for text;
-- A group's waiting runs in tick order (scheduled_for, then id): a freed slot wakes the first.
CREATE INDEX runs_waiting_group ON runs (waiting_for, scheduled_for, id) WHERE state = 'waiting' AND waiting_for IS NOT NULL;
