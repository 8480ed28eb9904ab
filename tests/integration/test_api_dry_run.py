"""POST /api/jobs and PATCH /api/jobs/{id} with `?dry_run=true`: every check of the write, the
write too, rolled back (what `cronos apply --dry-run` asks; issue 37, item 4)."""

from __future__ import annotations

import asyncpg

from cronos.settings import Settings
from tests.integration.api_client import SEED_JOB, running_api
from tests.integration.test_api_auth import SHELL_JOB, _forbidden
from tests.integration.test_shell_authority import shell_api


async def _counts(pg_pool: asyncpg.Pool) -> tuple[int, int, int]:
    row = await pg_pool.fetchrow(
        "SELECT (SELECT count(*) FROM jobs) AS j, (SELECT count(*) FROM job_revisions) AS r,"
        " (SELECT count(*) FROM audit_log) AS a"
    )
    return row["j"], row["r"], row["a"]


async def test_a_dry_run_refuses_what_the_write_would_and_writes_nothing(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(settings) as api:
        made = await api.create(name="taken")
        before = await _counts(pg_pool)
        http = {**SEED_JOB, "name": "new", "kind": "http", "payload": {"url": "https://x.test"}}
        would = await api.call("POST", "/api/jobs?dry_run=true", json=http)
        assert would.status == 200 and would.body["name"] == "new", would.body
        assert "webhook_secret" not in would.body  # no secret is drawn for a job that is not made
        for body, status, field in (
            ({**SEED_JOB, "name": "taken"}, 409, None),  # only the insert's unique key knows
            ({**SEED_JOB, "name": "p", "parents": [10**6]}, 422, "$.parents"),
            ({**SEED_JOB, "name": "g", "concurrency_group": "none"}, 422, "$.concurrency_group"),
            ({**SEED_JOB, "name": "s", "kind": "shell", "payload": {"argv": ["true"]}}, 422, "$.kind"),
            ({**SEED_JOB, "name": "h", "kind": "http", "payload": {"url": "http://10.0.0.1/"}}, 422, "$.payload.url"),
        ):
            refused = await api.call("POST", "/api/jobs?dry_run=true", json=body)
            assert refused.status == status and refused.body.get("field") == field, refused.body
        changed = await api.call("PATCH", f"/api/jobs/{made['id']}?dry_run=true", json={"cron_expression": "@daily"})
        assert changed.status == 200 and changed.body["cron_expression"] == "@daily", changed.body
        assert (await api.call("GET", f"/api/jobs/{made['id']}")).body["cron_expression"] == SEED_JOB["cron_expression"]
        bad = await api.call("PATCH", f"/api/jobs/{made['id']}?dry_run=true", json={"parents": [made["id"]]})
        assert bad.status == 422 and bad.body["field"] == "$.parents", bad.body
        assert (await api.call("POST", "/api/jobs?dry_run=maybe", json=SEED_JOB)).status == 422
        assert await _counts(pg_pool) == before  # no job, revision or audit entry


async def test_a_dry_run_of_pause_resume_and_delete_checks_and_changes_nothing(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with shell_api(settings, pg_pool) as (api, writer, admin):
        made = await api.call("POST", "/api/jobs", json={**SEED_JOB, "status": "paused"}, token=writer)
        parent = made.body["id"]
        child = {**SHELL_JOB, "parents": [parent]}
        assert (await api.call("POST", "/api/jobs", json=child, token=admin)).status == 201
        before = await _counts(pg_pool)
        # The refusals the writes would meet: a resume lets the shell child run; a parent cannot go.
        _forbidden(await api.call("POST", f"/api/jobs/{parent}/resume?dry_run=true", token=writer), "admin")
        gone = await api.call("DELETE", f"/api/jobs/{parent}?dry_run=true", token=admin)
        assert gone.status == 409, gone.body
        resumed = await api.call("POST", f"/api/jobs/{parent}/resume?dry_run=true", token=admin)
        assert resumed.status == 200 and resumed.body["status"] == "active", resumed.body
        toggled = await api.call("PATCH", f"/api/jobs/{parent}/toggle?dry_run=true", token=admin)
        assert toggled.status == 200 and toggled.body["status"] == "active", toggled.body
        assert await _counts(pg_pool) == before
        assert await pg_pool.fetchval("SELECT status FROM jobs WHERE id = $1", parent) == "paused"
