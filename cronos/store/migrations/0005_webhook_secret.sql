-- Each job's Standard Webhooks signing secret (whsec_ + base64 of 32 random bytes): http runs
-- sign their requests with it. PostgreSQL draws it (gen_random_uuid is pg_strong_random, 122
-- random bits a uuid; two make 244), so creation and rotation share one expression and no
-- row is ever without one. Write-only: the API shows it at creation and rotation only.
CREATE FUNCTION cronos_new_webhook_secret() RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT 'whsec_' || encode(decode(
        replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''), 'hex'), 'base64')
$$;
ALTER TABLE jobs ADD COLUMN webhook_secret text NOT NULL DEFAULT cronos_new_webhook_secret();
