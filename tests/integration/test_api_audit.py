"""The audit trail (GET /api/jobs/{id}/history) and the webhook secret shown once, against a real API."""

from __future__ import annotations

import json

import asyncpg

from cronos.settings import Settings
from cronos.store.tokens import TokenStore
from tests.integration.api_client import SEED_JOB, running_api

SECRET_HEADER = "Bearer sk-live-very-secret-value"
HOOK = {
    **SEED_JOB,
    "name": "hook",
    "kind": "http",
    "payload": {"url": "http://127.0.0.1:9/hook?api_key=qs-secret-123", "headers": {"Authorization": SECRET_HEADER}},
}


async def test_each_job_change_is_audited_with_actor_before_and_after(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    _info, token = await TokenStore(pg_pool).create("deployer", ["write"], None, actor="cli")
    async with running_api(settings, token=token) as api:
        created = await api.call("POST", "/api/jobs", json=HOOK)
        assert created.status == 201, created.body
        job_id, first_secret = created.body["id"], created.body["webhook_secret"]
        assert first_secret.startswith("whsec_")
        assert "webhook_secret" not in (await api.call("GET", f"/api/jobs/{job_id}")).body
        assert "webhook_secret" not in (await api.call("GET", "/api/jobs")).body["items"][0]

        # A PATCH that sends back what GET showed (***) keeps the stored secrets.
        shown = (await api.call("GET", f"/api/jobs/{job_id}")).body["payload"]
        assert shown["headers"]["Authorization"] == "***"
        patched = await api.call("PATCH", f"/api/jobs/{job_id}", json={"name": "hook-2", "payload": shown})
        assert patched.status == 200, patched.body
        stored = await pg_pool.fetchval("SELECT payload FROM jobs WHERE id = $1", job_id)
        assert stored["headers"]["Authorization"] == SECRET_HEADER
        assert "qs-secret-123" in stored["url"]

        assert (await api.call("POST", f"/api/jobs/{job_id}/pause")).status == 200
        assert (await api.call("POST", f"/api/jobs/{job_id}/trigger")).status == 202
        rotated = await api.call("POST", f"/api/jobs/{job_id}/rotate-secret")
        assert rotated.status == 200 and rotated.body["webhook_secret"].startswith("whsec_")
        assert rotated.body["webhook_secret"] != first_secret
        assert (
            await pg_pool.fetchval("SELECT webhook_secret FROM jobs WHERE id = $1", job_id)
            == (rotated.body["webhook_secret"])
        )
        assert (await api.call("DELETE", f"/api/jobs/{job_id}")).status == 204

        history = await api.call("GET", f"/api/jobs/{job_id}/history")  # still there after the delete
        assert history.status == 200, history.body
        entries = history.body["items"]
        assert [e["action"] for e in entries] == [
            "deleted",
            "secret_rotated",
            "triggered",
            "paused",
            "updated",
            "created",
        ]
        assert {e["actor"] for e in entries} == {"deployer"} and all(e["job_id"] == job_id for e in entries)
        deleted, _rotated, triggered, paused, updated, made = entries
        assert made["before"] is None and made["after"]["name"] == "hook"
        assert updated["before"]["name"] == "hook" and updated["after"]["name"] == "hook-2"
        assert updated["detail"] == {"fields": ["name", "payload"]}
        assert paused["before"]["status"] == "active" and paused["after"]["status"] == "paused"
        assert triggered["detail"]["run_id"] > 0
        assert deleted["before"]["name"] == "hook-2" and deleted["after"] is None
        assert made["after"]["payload"]["headers"]["Authorization"] == "***"

        # No secret of any kind anywhere in the trail, nor in the table behind it.
        everything = json.dumps(entries) + str(await pg_pool.fetch("SELECT * FROM audit_log"))
        for secret in ("sk-live-very-secret-value", "qs-secret-123", first_secret, rotated.body["webhook_secret"]):
            assert secret not in everything
        assert token not in everything

        paged = await api.walk(f"/api/jobs/{job_id}/history", limit=4)
        assert paged == [e["id"] for e in entries]
        assert (await api.call("GET", "/api/jobs/999999/history")).status == 404
        assert (await api.call("GET", f"/api/jobs/{job_id}")).status == 404


async def test_task_jobs_get_no_webhook_secret_and_failed_writes_leave_no_entry(settings: Settings) -> None:
    async with running_api(settings) as api:
        job = await api.create()
        assert "webhook_secret" not in job
        bad = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"cron_expression": "nope"})
        assert bad.status == 422
        entries = (await api.call("GET", f"/api/jobs/{job['id']}/history")).body["items"]
        assert [(e["action"], e["actor"]) for e in entries] == [("created", "local")]
