-- A million jobs (issue 27, item 4): the console's name search (`q`, name ILIKE '%text%') finds a
-- narrow match through a trigram index instead of reading every job (about a second at a million);
-- cronos.store.pages decides when a page turns to it. pg_trgm ships with PostgreSQL (contrib) and
-- is a trusted extension (a database owner may create it); where it cannot be created the index is
-- left out and a narrow search reads the jobs table, as before. Building it takes about 5 s a
-- million jobs, during which job writes wait.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'pg_trgm not created (%): job name searches read the jobs table', SQLERRM;
        END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX IF NOT EXISTS jobs_name_trgm ON jobs USING gin (name gin_trgm_ops);
    END IF;
END
$$;
