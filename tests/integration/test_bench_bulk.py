"""The scale benchmarks' bulk registration (cronos.bench.bulk) writes a job, its revision and its
audit entry exactly as the store's create does, but for the job's own id, name, expression and labels."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import msgspec
import pytest

from api.schemas import JobCreate
from cronos.bench.bulk import BULK_JOBS, copy_jobs
from cronos.models import JOB_WRITABLE
from cronos.store.db import connect_one
from cronos.store.jobs import JobStore

FIELDS = {"payload": {"action": "bench.count"}, "timezone": "Europe/Berlin", "max_retries": 2}
OWN = ("id", "name", "cron_expression", "labels")  # what each copy has of its own
DRAWN = ("created_at", "updated_at", "last_scheduled_for", "webhook_secret")  # drawn per row, like the store's


def test_the_copy_sets_every_column_the_store_sets() -> None:
    inserted = re.search(r"INSERT INTO jobs \(([^)]*)\)", BULK_JOBS)
    assert inserted is not None
    assert [c.strip() for c in inserted.group(1).split(",")] == [*JOB_WRITABLE, "last_scheduled_for"]


async def _rows(conn: asyncpg.Connection, job_id: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    job = dict(await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id))
    revision = dict(await conn.fetchrow("SELECT * FROM job_revisions WHERE job_id = $1", job_id))
    audit = dict(await conn.fetchrow("SELECT * FROM audit_log WHERE job_id = $1", job_id))
    return job, revision, audit


def _without(row: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in names}


@pytest.mark.parametrize("copies", [1, 3])
async def test_a_copy_is_the_job_the_store_would_have_created(
    pg_pool: asyncpg.Pool, database_url: str, copies: int
) -> None:
    store = JobStore(pg_pool)
    body = JobCreate(name="by-the-store", cron_expression="*/5 * * * *", labels={"team": "data"}, **FIELDS)
    reference, _ = await store.create(msgspec.structs.asdict(body))
    body = JobCreate(name="template", cron_expression="* * * * *", labels={"team": "web"}, **FIELDS)
    template, _ = await store.create(msgspec.structs.asdict(body))
    conn = await connect_one(database_url)
    try:
        specs = [(f"copy-{i}", "*/5 * * * *", {"team": "data"}) for i in range(copies)]
        assert await copy_jobs(conn, template.id, specs) == copies
        want_job, want_revision, want_audit = await _rows(conn, reference.id)
        copy_id = await conn.fetchval("SELECT max(id) FROM jobs")
        job, revision, audit = await _rows(conn, copy_id)
        with pytest.raises(RuntimeError):  # copies follow the newest job only
            await copy_jobs(conn, template.id, specs[:1])
    finally:
        await conn.close()
    assert job["name"] == f"copy-{copies - 1}" and job["labels"] == {"team": "data"}
    assert _without(job, *OWN, *DRAWN) == _without(want_job, *OWN, *DRAWN)
    assert job["last_scheduled_for"] == job["created_at"], "the cursor starts at creation, as the store's"
    assert _without(revision, "job_id", "at", "changes") == _without(want_revision, "job_id", "at", "changes")
    assert revision["changes"] == {**want_revision["changes"], "name": job["name"]}
    assert _without(audit, "id", "job_id", "at", "after") == _without(want_audit, "id", "job_id", "at", "after")
    assert audit["after"] == {**want_audit["after"], "id": job["id"], "name": job["name"]}
