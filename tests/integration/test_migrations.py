"""`migrate()`: creates the database, is idempotent, and safe when run twice at once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from cronos.store.db import ensure_database, migrate
from tests.services import Services, with_database

TABLES = {"jobs", "runs", "leader_epoch", "leader_log", "schema_migrations"}


@pytest.fixture
async def fresh_dsn(services: Services) -> AsyncIterator[str]:
    """A DSN to a database that does not exist yet (dropped afterwards)."""
    name = f"cronos_mig_{uuid.uuid4().hex[:12]}"
    yield with_database(services.pg_admin_dsn, name)
    admin = await asyncpg.connect(services.pg_admin_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def _state(dsn: str) -> tuple[set[str], list[int], int]:
    conn = await asyncpg.connect(dsn)
    try:
        tables = {r["tablename"] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
        versions = [r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")]
        epochs = await conn.fetchval("SELECT count(*) FROM leader_epoch")
    finally:
        await conn.close()
    return tables, versions, epochs


async def test_migrate_creates_the_database_and_is_idempotent(fresh_dsn: str) -> None:
    first = await migrate(fresh_dsn)
    assert first and first == sorted(first) and first[0] == 1
    tables, versions, epochs = await _state(fresh_dsn)
    assert tables >= TABLES and versions == first and epochs == 1
    assert await migrate(fresh_dsn) == []  # nothing left to apply
    assert await _state(fresh_dsn) == (tables, versions, epochs)


async def test_concurrent_migrations_on_an_empty_database_apply_once(fresh_dsn: str) -> None:
    await ensure_database(fresh_dsn)  # exists, no schema yet: only the advisory lock decides
    results = await asyncio.gather(migrate(fresh_dsn), migrate(fresh_dsn), migrate(fresh_dsn))
    applied = [version for result in results for version in result]
    tables, versions, epochs = await _state(fresh_dsn)
    assert sorted(applied) == versions and len(versions) >= 1
    assert tables >= TABLES and epochs == 1


# Two CREATE DATABASE racing can fail with UniqueViolationError (pg_database_datname_index)
# instead of DuplicateDatabaseError; cronos/store/db.py ensure_database catches only the latter.
async def test_concurrent_migrations_create_the_database_once(fresh_dsn: str) -> None:
    results = await asyncio.gather(migrate(fresh_dsn), migrate(fresh_dsn), migrate(fresh_dsn))
    applied = [version for result in results for version in result]
    tables, versions, epochs = await _state(fresh_dsn)
    assert sorted(applied) == versions  # each version applied by exactly one caller
    assert tables >= TABLES and epochs == 1
