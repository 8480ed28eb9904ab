"""`migrate()`: creates the database, is idempotent, and safe when run twice at once."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from cronos.store.db import ensure_database, migrate

TABLES = {"jobs", "runs", "leader_epoch", "leader_log", "schema_migrations"}


async def _state(dsn: str) -> tuple[set[str], list[int], int]:
    conn = await asyncpg.connect(dsn)
    try:
        tables = {r["tablename"] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
        versions = [r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")]
        epochs = await conn.fetchval("SELECT count(*) FROM leader_epoch")
    finally:
        await conn.close()
    return tables, versions, epochs


async def test_migrate_creates_the_database_and_is_idempotent(empty_database: str) -> None:
    first = await migrate(empty_database)
    assert first and first == sorted(first) and first[0] == 1
    tables, versions, epochs = await _state(empty_database)
    assert tables >= TABLES and versions == first and epochs == 1
    assert await migrate(empty_database) == []  # nothing left to apply
    assert await _state(empty_database) == (tables, versions, epochs)


async def test_concurrent_migrations_on_an_empty_database_apply_once(empty_database: str) -> None:
    await ensure_database(empty_database)  # exists, no schema yet: only the advisory lock decides
    results = await asyncio.gather(migrate(empty_database), migrate(empty_database), migrate(empty_database))
    applied = [version for result in results for version in result]
    tables, versions, epochs = await _state(empty_database)
    assert sorted(applied) == versions and len(versions) >= 1
    assert tables >= TABLES and epochs == 1


# Two CREATE DATABASE racing can fail with UniqueViolationError (pg_database_datname_index)
# instead of DuplicateDatabaseError; cronos/store/db.py ensure_database catches only the latter.
async def test_concurrent_migrations_create_the_database_once(empty_database: str) -> None:
    results = await asyncio.gather(migrate(empty_database), migrate(empty_database), migrate(empty_database))
    applied = [version for result in results for version in result]
    tables, versions, epochs = await _state(empty_database)
    assert sorted(applied) == versions  # each version applied by exactly one caller
    assert tables >= TABLES and epochs == 1


# The last migration before runs was partitioned (others may be numbered below it).
BEFORE_PARTITIONING = 8


async def test_partitioning_runs_keeps_every_row_and_every_guarantee(empty_database: str) -> None:
    await migrate(empty_database, upto=BEFORE_PARTITIONING)
    conn = await asyncpg.connect(empty_database)
    try:
        job, other = [
            await conn.fetchval("INSERT INTO jobs (name, cron_expression) VALUES ($1, '* * * * *') RETURNING id", n)
            for n in ("a", "b")
        ]
        await conn.execute(
            "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at, finished_at, result)"
            " SELECT $1, now() - g * interval '1 minute', 'schedule', 'completed', now() - g * interval '1 minute',"
            " now(), 'r' || g FROM generate_series(1, 3000) g",
            job,
        )
        running = await conn.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at, node_id, started_at, lease_until)"
            " VALUES ($1, now() - interval '5 s', 'schedule', 'running', now(), 'n1', now(), now() + interval '1 min')"
            " RETURNING id",
            other,
        )
        queued = await conn.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at) VALUES"
            " ($1, now() + interval '2 days', 'schedule', 'queued', now() + interval '2 days') RETURNING id",
            other,
        )
        before = [tuple(r) for r in await conn.fetch("SELECT * FROM runs ORDER BY id")]
    finally:
        await conn.close()

    assert await migrate(empty_database) and await migrate(empty_database) == []
    conn = await asyncpg.connect(empty_database)
    try:
        assert await conn.fetchval("SELECT relkind::text FROM pg_class WHERE relname = 'runs'") == "p"
        # Later migrations may add columns (after the old ones): the old ones are unchanged.
        width = len(before[0])
        assert [tuple(r)[:width] for r in await conn.fetch("SELECT * FROM runs ORDER BY id")] == before
        # Every old row is in the old table, now the partition of everything before a midnight.
        legacy = await conn.fetchval("SELECT relname FROM pg_class WHERE relname LIKE 'runs_before_%'")
        assert await conn.fetchval(f'SELECT count(*) FROM "{legacy}"') == len(before)
        # Ids go on after the old ones.
        new = await conn.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at) VALUES ($1, now(), 'manual', 'queued',"
            " now()) RETURNING id",
            job,
        )
        assert new > max(row[0] for row in before)
        # A queued run has no end time (claims look among unfinished runs only).
        with pytest.raises(asyncpg.CheckViolationError, match="runs_unfinished_has_no_end"):
            await conn.execute("UPDATE runs SET finished_at = now() WHERE id = $1", new)
        # G1: the tick identity is unique across the table.
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute(
                "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at)"
                " SELECT job_id, scheduled_for, 'schedule', 'queued', due_at FROM runs WHERE id = $1",
                queued,
            )
        # G3: the running run brought over still keeps a second exclusive run of its job from
        # starting, although the two are in different partitions.
        assert await conn.fetchval("SELECT run_id FROM runs_running_exclusive WHERE job_id = $1", other) == running
        with pytest.raises(asyncpg.UniqueViolationError, match="runs_one_running_exclusive"):
            await conn.execute("UPDATE runs SET state = 'running' WHERE id = $1", queued)
        await conn.execute("UPDATE runs SET state = 'completed' WHERE id = $1", running)
        await conn.execute("UPDATE runs SET state = 'running' WHERE id = $1", queued)
        assert await conn.fetchval("SELECT run_id FROM runs_running_exclusive WHERE job_id = $1", other) == queued
        await conn.execute("DELETE FROM jobs WHERE id = $1", other)  # the cascade reaches both tables
        assert await conn.fetchval("SELECT count(*) FROM runs_running_exclusive") == 0
    finally:
        await conn.close()


async def test_tokens_made_before_the_upgrade_keep_protected_mode_closed(empty_database: str) -> None:
    await migrate(empty_database, upto=19)
    conn = await asyncpg.connect(empty_database)
    try:
        await conn.execute(
            "INSERT INTO api_tokens (name, token_hash, scopes, revoked_at) VALUES ('old', $1, '{read}', now())",
            b"h" * 32,
        )
        await migrate(empty_database)
        assert await conn.fetchval("SELECT closed FROM api_protected_mode") is True
    finally:
        await conn.close()
