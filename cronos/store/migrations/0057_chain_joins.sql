-- Failure paths and joins (issue 40, item 5; cronos.chains). jobs.chain: when a child runs after
-- each parent (`on`) and whether it joins them per logical tick (`join`); NULL keeps chains as they
-- were (every edge `completed`, no join). No index: the finish reads it only on the rows of
-- children that FOLLOW_UP_FACTS already finds through parents.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS chain jsonb;

-- A join's state, one row per (child job, logical tick): the parents that ended that tick so far
-- (their job ids, runs and outcomes, in arrival order), when it times out, and once decided, what
-- it did (`ran` or `skipped`), why, and the child run it made. Written in the finish that brings a
-- parent's final outcome (its row lock serialises two parents ending at once) and decided there,
-- or by the leader once `deadline` passed (chain_joins_pending).
CREATE TABLE IF NOT EXISTS chain_joins (
    child_id   bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    tick       timestamptz NOT NULL,
    parents    bigint[] NOT NULL,
    runs       bigint[] NOT NULL,
    outcomes   text[] NOT NULL,
    opened_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    deadline   timestamptz NOT NULL,
    decided    text CHECK (decided IN ('ran', 'skipped', 'dropped')),
    decided_at timestamptz,
    reason     text,
    run_id     bigint,
    PRIMARY KEY (child_id, tick)
);
CREATE INDEX IF NOT EXISTS chain_joins_pending ON chain_joins (deadline) WHERE decided IS NULL;
-- The leader forgets decided joins past the runs' retention (their runs are gone with their days).
CREATE INDEX IF NOT EXISTS chain_joins_decided ON chain_joins (decided_at) WHERE decided IS NOT NULL;
