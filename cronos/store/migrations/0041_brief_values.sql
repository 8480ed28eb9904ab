-- History and revision pages bounded in bytes (issue 36): the list views show each top-level value
-- of a JSON object larger than `bound` bytes as its size and a fingerprint, so a page stays small
-- whatever a payload weighs. Both are read from the stored form, without writing the value out as
-- text (which cost PostgreSQL 3-7 times as much for 60 KB values): `bytes` is its size as stored
-- (about its size as JSON), `hash` PostgreSQL's 64-bit hash of it (equal values, equal hashes; not
-- a cryptographic digest). One function, so the statements that use it stay written out.
CREATE FUNCTION cronos_brief(doc jsonb, bound integer) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(doc) = 'object' THEN COALESCE((SELECT jsonb_object_agg(key,
        CASE WHEN pg_column_size(value) <= bound THEN value ELSE jsonb_build_object('truncated', true,
            'bytes', pg_column_size(value), 'hash', lpad(to_hex(jsonb_hash_extended(value, 0)), 16, '0')) END)
        FROM jsonb_each(doc)), '{}')
    ELSE doc END
$$;
