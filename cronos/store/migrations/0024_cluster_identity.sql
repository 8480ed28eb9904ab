-- Which cluster this database is (issue 23 item 6): a random id made once, here, and written to
-- Redis under the key prefix by the first process to start (cronos/store/identity.py). A process
-- whose database and Redis keys carry different ids refuses to start: two deployments sharing a
-- Redis prefix by accident would otherwise mix their streams, locks and leader.
-- One row at most: `singleton` can only be true and is unique.
CREATE TABLE IF NOT EXISTS cluster_identity (
    id uuid PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    singleton boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton)
);
INSERT INTO cluster_identity (id) VALUES (gen_random_uuid()) ON CONFLICT (singleton) DO NOTHING;
