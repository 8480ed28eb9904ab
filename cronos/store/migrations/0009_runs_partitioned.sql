-- Bounded history: `runs` becomes a table partitioned by scheduled_for (one partition per UTC
-- day), so the leader can drop whole days past CRONOS_RUNS_RETENTION instead of deleting rows
-- (dispatcher/retention.py). Nothing is copied: the existing table, with every row, becomes the
-- partition of everything before the next UTC midnight (`runs_before_YYYYMMDD`, dropped in its
-- turn once that is past retention), then one partition per day through three days ahead, and
-- a default partition for any other time.
--
-- Built from the table as it is (columns, defaults, checks, indexes and foreign keys other
-- migrations added come along), except what partitioning changes:
-- * the primary key becomes (id, scheduled_for): a unique key must hold the partition key.
--   Ids stay unique (one identity sequence, continued from the old one).
-- * G3 (one running exclusive run per job) cannot be a unique index over partitions, so
--   `runs_running_exclusive` holds the running exclusive run of each job, kept by triggers in
--   the statement that changes the run: a second claim violates its primary key, named
--   `runs_one_running_exclusive` as the old index was, and the claim arbitrates as before.
-- A unique index of runs without scheduled_for stops the migration rather than be weakened.
DO $migration$
DECLARE
    upper_day timestamptz := date_trunc('day', greatest((SELECT max(scheduled_for) FROM runs), now()), 'UTC')
        + interval '1 day';
    legacy text := 'runs_before_' || to_char(upper_day AT TIME ZONE 'UTC', 'YYYYMMDD');
    old_seq text := pg_get_serial_sequence('runs', 'id');
    seq_next bigint;
    ix record;
    day timestamptz;
    constraints text[] := '{}';
    indexes text[] := '{}';  -- and triggers
    stmt text;
BEGIN
    -- What to rebuild on the partitioned table, read while the names are still `runs`'s.
    FOR ix IN
        SELECT con.conname, con.contype, pg_get_constraintdef(con.oid) AS def
        FROM pg_constraint con WHERE con.conrelid = 'runs'::regclass AND con.contype IN ('p', 'u', 'f', 'x')
        ORDER BY con.conname
    LOOP
        IF ix.contype = 'p' THEN
            constraints := constraints || format('ALTER TABLE runs ADD CONSTRAINT %I PRIMARY KEY (id, scheduled_for)', ix.conname);
        ELSIF ix.contype = 'u' AND ix.def NOT LIKE '%scheduled_for%' THEN
            RAISE EXCEPTION 'runs constraint % (%) lacks scheduled_for: it cannot hold across partitions', ix.conname, ix.def;
        ELSE
            constraints := constraints || format('ALTER TABLE runs ADD CONSTRAINT %I %s', ix.conname, ix.def);
        END IF;
    END LOOP;
    FOR ix IN
        SELECT c.relname, i.indisunique, pg_get_indexdef(i.indexrelid) AS def
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'runs'::regclass
          AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid AND con.conrelid = i.indrelid)
        ORDER BY c.relname
    LOOP
        IF ix.relname = 'runs_one_running_exclusive' THEN
            -- Kept as a plain index (REPLACE_RUNNING reads a job's running runs through it).
            indexes := indexes || 'CREATE INDEX runs_running_exclusive_job ON runs (job_id) WHERE state = ''running'' AND exclusive'::text;
        ELSIF ix.indisunique AND ix.def NOT LIKE '%scheduled_for%' THEN
            RAISE EXCEPTION 'unique index % of runs lacks scheduled_for: it cannot hold across partitions', ix.relname;
        ELSE
            indexes := indexes || ix.def;
        END IF;
    END LOOP;

    FOR ix IN SELECT t.tgname, pg_get_triggerdef(t.oid) AS def FROM pg_trigger t
              WHERE t.tgrelid = 'runs'::regclass AND NOT t.tgisinternal ORDER BY t.tgname LOOP
        indexes := indexes || ix.def;  -- a trigger on the partitioned table covers every partition
        EXECUTE format('DROP TRIGGER %I ON runs', ix.tgname);
    END LOOP;

    -- The old table becomes the first partition: free the names its indexes hold.
    EXECUTE format('ALTER TABLE runs RENAME TO %I', legacy);
    FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = legacy::regclass LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', ix.relname, left(legacy || '_' || ix.relname, 63));
    END LOOP;
    -- A partition may not keep a primary key of its own, and G3 moves to runs_running_exclusive.
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', legacy, left(legacy || '_runs_pkey', 63));
    EXECUTE format('DROP INDEX %I', left(legacy || '_runs_one_running_exclusive', 63));

    EXECUTE format('CREATE TABLE runs (LIKE %I INCLUDING ALL EXCLUDING INDEXES) PARTITION BY RANGE (scheduled_for)', legacy);
    -- One sequence for every partition: the new identity goes on from where the old one was.
    EXECUTE format('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM %s', old_seq) INTO seq_next;
    EXECUTE format('ALTER TABLE %I ALTER COLUMN id DROP IDENTITY', legacy);
    PERFORM setval(pg_get_serial_sequence('runs', 'id'), seq_next, false);
    EXECUTE format('ALTER SEQUENCE %s RENAME TO runs_id_seq', pg_get_serial_sequence('runs', 'id'));

    FOREACH stmt IN ARRAY constraints || indexes LOOP
        EXECUTE stmt;
    END LOOP;
    -- Indexes and foreign keys the old table has already are taken over, not rebuilt or checked
    -- again; only the new primary key is built. The partition bound is checked by one scan.
    EXECUTE format('ALTER TABLE runs ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', legacy, upper_day);

    day := upper_day;
    WHILE day < date_trunc('day', now(), 'UTC') + interval '4 days' LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF runs FOR VALUES FROM (%L) TO (%L)',
            'runs_' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD'), day, day + interval '1 day');
        day := day + interval '1 day';
    END LOOP;
    -- Whatever no day holds (a far-future test date, a day the leader has not created yet) still
    -- lands somewhere: an insert never fails for want of a partition. The leader moves such rows
    -- into their day when it creates it, and deletes those past retention.
    CREATE TABLE runs_default PARTITION OF runs DEFAULT;
END
$migration$;

-- Unfinished runs (queued, running: finished_at is set with every end state) by id: a statement
-- on given run ids (a claim, a heartbeat, a finish) looks in every partition, and only this
-- index, small in every day but the current ones, makes that cost nothing for the days of
-- finished runs (cronos/store/queries.py).
CREATE INDEX runs_unfinished_id ON runs (id) WHERE finished_at IS NULL;
-- What that index relies on, enforced: a run still to run or running has no end time (a writer
-- that queued a run again without clearing it would hide the run from every claim).
ALTER TABLE runs ADD CONSTRAINT runs_unfinished_has_no_end CHECK (state NOT IN ('queued', 'running') OR finished_at IS NULL);

CREATE TABLE runs_running_exclusive (
    job_id  bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run_id  bigint NOT NULL,
    CONSTRAINT runs_one_running_exclusive PRIMARY KEY (job_id)
);
INSERT INTO runs_running_exclusive (job_id, run_id) SELECT job_id, id FROM runs WHERE state = 'running' AND exclusive;

CREATE FUNCTION cronos_runs_running_exclusive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state = 'running' AND OLD.exclusive THEN
        DELETE FROM runs_running_exclusive WHERE job_id = OLD.job_id AND run_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state = 'running' AND NEW.exclusive THEN
        INSERT INTO runs_running_exclusive (job_id, run_id) VALUES (NEW.job_id, NEW.id);
    END IF;
    RETURN NULL;
END
$$;
-- Only the changes in and out of "running exclusive" fire (a heartbeat, a queued insert do not).
CREATE TRIGGER runs_running_exclusive_insert AFTER INSERT ON runs FOR EACH ROW
    WHEN (NEW.state = 'running' AND NEW.exclusive) EXECUTE FUNCTION cronos_runs_running_exclusive();
CREATE TRIGGER runs_running_exclusive_update AFTER UPDATE OF state, exclusive ON runs FOR EACH ROW
    WHEN ((OLD.state = 'running' AND OLD.exclusive) IS DISTINCT FROM (NEW.state = 'running' AND NEW.exclusive))
    EXECUTE FUNCTION cronos_runs_running_exclusive();
CREATE TRIGGER runs_running_exclusive_delete AFTER DELETE ON runs FOR EACH ROW
    WHEN (OLD.state = 'running' AND OLD.exclusive) EXECUTE FUNCTION cronos_runs_running_exclusive();
