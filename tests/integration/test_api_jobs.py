"""The jobs endpoints against a real API, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from api.bodies import PAGE_PAYLOAD_BYTES
from cronos.settings import Settings
from cronos.store.queries.notifications import JOBS_CHANNEL
from tests.integration.api_client import SEED_JOB, Api, running_api


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


JSON = {"Content-Type": "application/json"}


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def _row(pool: asyncpg.Pool, job_id: int) -> dict[str, Any]:
    row = await pool.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)
    assert row is not None
    return dict(row)


async def test_seed_flow_register_list_toggle(api: Api, pg_pool: asyncpg.Pool) -> None:
    before = datetime.now(UTC)
    job = await api.create()
    assert job["name"] == "Sync Database Indexes"
    assert job["status"] == "active"
    assert (job["timezone"], job["kind"], job["concurrency_policy"], job["misfire_policy"]) == (
        "UTC",
        "task",
        "forbid",
        "run_once",
    )
    assert job["timeout_s"] == 300 and job["max_retries"] == 0
    next_run = _ts(job["next_run_at"])
    assert before < next_run <= before + timedelta(minutes=5, seconds=1)
    assert next_run.minute % 5 == 0 and next_run.second == 0
    # The dispatch cursor starts at creation: no tick before the job existed is due.
    row = await _row(pg_pool, job["id"])
    assert before - timedelta(seconds=1) < row["last_scheduled_for"] <= datetime.now(UTC)

    listed = await api.call("GET", "/api/jobs")
    assert listed.status == 200
    assert [j["name"] for j in listed.body["items"]] == ["Sync Database Indexes"]
    assert listed.body["next_cursor"] is None

    paused = await api.call("PATCH", f"/api/jobs/{job['id']}/toggle")
    assert paused.status == 200
    assert paused.body["status"] == "paused" and paused.body["next_run_at"] is None
    resumed = await api.call("PATCH", f"/api/jobs/{job['id']}/toggle")
    assert resumed.body["status"] == "active" and resumed.body["next_run_at"] is not None


async def test_create_with_every_option(api: Api) -> None:
    job = await api.create(
        name="hook",
        cron_expression="0 30 9 * * 1-5",
        timezone="Europe/Berlin",
        kind="http",
        payload={"url": "https://example.com/hook", "method": "GET"},
        timeout_s=5,
        max_retries=3,
        retry_backoff_s=2.5,
        concurrency_policy="allow",
        misfire_policy="skip",
        misfire_grace_s=0,
        jitter_s=1.5,
        status="paused",
    )
    assert job["kind"] == "http" and job["timezone"] == "Europe/Berlin" and job["max_retries"] == 3
    assert job["status"] == "paused" and job["next_run_at"] is None
    got = await api.call("GET", f"/api/jobs/{job['id']}")
    assert got.status == 200 and got.body["payload"] == {"url": "https://example.com/hook", "method": "GET"}
    assert got.body["last_run"] is None


BAD_CREATES: list[tuple[str, Any, int, str | None]] = [
    ("malformed json", '{"name": ', 400, None),
    ("empty body", "", 400, None),
    ("not an object", [], 422, "$"),
    ("unknown field", {**SEED_JOB, "colour": "red"}, 422, "$.colour"),
    ("empty name", {**SEED_JOB, "name": ""}, 422, "$.name"),
    ("long name", {**SEED_JOB, "name": "x" * 201}, 422, "$.name"),
    ("name not a string", {**SEED_JOB, "name": 7}, 422, "$.name"),
    ("missing payload", {"name": "a", "cron_expression": "* * * * *"}, 422, "$.payload"),
    ("payload not an object", {**SEED_JOB, "payload": [1]}, 422, "$.payload"),
    ("bad cron", {**SEED_JOB, "cron_expression": "every minute"}, 422, "$.cron_expression"),
    ("cron out of range", {**SEED_JOB, "cron_expression": "61 * * * *"}, 422, "$.cron_expression"),
    ("bad timezone", {**SEED_JOB, "timezone": "Mars/Olympus"}, 422, "$.timezone"),
    ("task without action", {**SEED_JOB, "payload": {}}, 422, "$.payload.action"),
    ("http bad url", {**SEED_JOB, "kind": "http", "payload": {"url": "ftp://x"}}, 422, "$.payload.url"),
    ("http unknown key", {**SEED_JOB, "kind": "http", "payload": {"url": "http://x", "x": 1}}, 422, "$.payload.x"),
    ("unknown kind", {**SEED_JOB, "kind": "lambda"}, 422, "$.kind"),
    ("zero timeout", {**SEED_JOB, "timeout_s": 0}, 422, "$.timeout_s"),
    ("timeout as text", {**SEED_JOB, "timeout_s": "5"}, 422, "$.timeout_s"),
    ("negative retries", {**SEED_JOB, "max_retries": -1}, 422, "$.max_retries"),
    ("bad policy", {**SEED_JOB, "concurrency_policy": "sometimes"}, 422, "$.concurrency_policy"),
    ("bad misfire", {**SEED_JOB, "misfire_policy": "never"}, 422, "$.misfire_policy"),
    ("negative jitter", {**SEED_JOB, "jitter_s": -1}, 422, "$.jitter_s"),
    ("bad status", {**SEED_JOB, "status": "sleeping"}, 422, "$.status"),
    ("NUL in name", {**SEED_JOB, "name": "a\x00b"}, 422, "$.name"),
    (
        "NUL deep in payload",
        {**SEED_JOB, "payload": {"action": "a", "opts": {"k": ["ok", "\x00"]}}},
        422,
        "$.payload.opts.k[1]",
    ),
    ("lone surrogate", '{"name": "\\ud800", "cron_expression": "* * * * *", "payload": {}}', 400, None),
]


async def test_bad_creates_name_the_field_and_write_nothing(api: Api, pg_pool: asyncpg.Pool) -> None:
    for case, body, status, field in BAD_CREATES:
        if isinstance(body, str):
            reply = await api.call("POST", "/api/jobs", data=body, headers=JSON)
        else:
            reply = await api.call("POST", "/api/jobs", json=body)
        assert reply.status == status, (case, reply.body)
        assert reply.headers["Content-Type"].startswith("application/problem+json"), case
        assert reply.body["status"] == status and reply.body["type"].startswith("urn:cronos:problem:"), case
        assert reply.body.get("field") == field, (case, reply.body)
        if field is not None:
            assert field in reply.body["detail"], (case, reply.body)
    # G6: nothing invalid reached PostgreSQL
    assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 0


async def test_duplicate_name_is_409(api: Api, pg_pool: asyncpg.Pool) -> None:
    await api.create()
    reply = await api.call("POST", "/api/jobs", json=SEED_JOB)
    assert reply.status == 409 and "Sync Database Indexes" in reply.body["detail"]
    other = await api.create(name="other")
    renamed = await api.call("PATCH", f"/api/jobs/{other['id']}", json={"name": SEED_JOB["name"]})
    assert renamed.status == 409
    assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 2


async def test_unknown_or_malformed_ids_are_404(api: Api) -> None:
    for path in ("/api/jobs/999", "/api/jobs/abc", "/api/jobs/99999999999999999999999", "/api/runs/999"):
        reply = await api.call("GET", path)
        assert reply.status == 404, path
        assert reply.body["type"] == "urn:cronos:problem:not-found"
    for method, path in (
        ("PATCH", "/api/jobs/999"),
        ("DELETE", "/api/jobs/999"),
        ("PATCH", "/api/jobs/999/toggle"),
        ("POST", "/api/jobs/999/pause"),
        ("POST", "/api/jobs/999/resume"),
        ("POST", "/api/jobs/999/trigger"),
        ("GET", "/api/jobs/999/runs"),
    ):
        reply = await api.call(method, path, json={} if method == "PATCH" else None)
        assert reply.status == 404, (method, path, reply.body)
        assert "999" in reply.body["detail"]


async def test_wrong_method_is_405_and_big_body_413(api: Api, pg_pool: asyncpg.Pool) -> None:
    reply = await api.call("PUT", "/api/jobs")
    assert reply.status == 405 and reply.body["status"] == 405
    assert set(reply.headers["Allow"].split(",")) >= {"GET", "POST"}
    big = {**SEED_JOB, "payload": {"action": "x", "blob": "y" * (1024 * 1024 + 10)}}
    reply = await api.call("POST", "/api/jobs", data=io.BytesIO(json.dumps(big).encode()), headers=JSON)
    assert reply.status == 413 and reply.body["title"] == "Request body too large"
    assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 0


async def test_patch_is_partial_validated_and_atomic(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create()
    before = await _row(pg_pool, job["id"])
    for body, field in (
        ({"cron_expression": "nope"}, "$.cron_expression"),
        ({"timezone": "Nowhere/Land"}, "$.timezone"),
        ({"kind": "http"}, "$.payload.action"),  # the merged job is checked: http payloads have no action
        ({"payload": {"action": ""}}, "$.payload.action"),
        ({"timeout_s": -1, "name": "fine"}, "$.timeout_s"),
        ({"id": 5}, "$.id"),
        ({"timezone": None}, "$.timezone"),
    ):
        reply = await api.call("PATCH", f"/api/jobs/{job['id']}", json=body)
        assert reply.status == 422 and reply.body["field"] == field, (body, reply.body)
    assert await _row(pg_pool, job["id"]) == before  # a failed PATCH changes nothing

    reply = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"max_retries": 2, "jitter_s": 0.5})
    assert reply.status == 200
    assert (reply.body["max_retries"], reply.body["jitter_s"], reply.body["name"]) == (2, 0.5, SEED_JOB["name"])
    after = await _row(pg_pool, job["id"])
    assert after["last_scheduled_for"] == before["last_scheduled_for"]  # not a schedule change
    assert after["updated_at"] > before["updated_at"]


async def test_schedule_change_and_resume_move_the_cursor_forward(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create()
    old = datetime.now(UTC) - timedelta(hours=3)
    await pg_pool.execute("UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", job["id"], old)
    t0 = datetime.now(UTC)
    reply = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"cron_expression": "@hourly"})
    assert reply.status == 200 and reply.body["cron_expression"] == "@hourly"
    assert (await _row(pg_pool, job["id"]))["last_scheduled_for"] >= t0 - timedelta(seconds=1)

    # A cursor ahead (ticks written ahead) moves back to the change instant: the new schedule's
    # ticks are planned from there (the old ones written ahead were handed over: test_api_revisions).
    ahead = datetime.now(UTC) + timedelta(hours=1)
    await pg_pool.execute("UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", job["id"], ahead)
    t1 = datetime.now(UTC)
    await api.call("PATCH", f"/api/jobs/{job['id']}", json={"timezone": "America/New_York"})
    assert t1 - timedelta(seconds=1) <= (await _row(pg_pool, job["id"]))["last_scheduled_for"] < ahead

    # Paused for three hours: resuming does not catch those ticks up.
    paused = await api.call("POST", f"/api/jobs/{job['id']}/pause")
    assert paused.status == 200 and paused.body["status"] == "paused"
    assert (await api.call("POST", f"/api/jobs/{job['id']}/pause")).body["status"] == "paused"  # idempotent
    await pg_pool.execute("UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", job["id"], old)
    t1 = datetime.now(UTC)
    resumed = await api.call("POST", f"/api/jobs/{job['id']}/resume")
    assert resumed.status == 200 and resumed.body["status"] == "active"
    assert (await _row(pg_pool, job["id"]))["last_scheduled_for"] >= t1 - timedelta(seconds=1)
    # Resuming an active job leaves the cursor alone.
    await pg_pool.execute("UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", job["id"], old)
    await api.call("POST", f"/api/jobs/{job['id']}/resume")
    assert (await _row(pg_pool, job["id"]))["last_scheduled_for"] == old


async def test_list_filters_and_paginates(api: Api) -> None:
    ids = [(await api.create(name=f"job-{i}"))["id"] for i in range(5)]
    await api.call("POST", f"/api/jobs/{ids[1]}/pause")
    assert await api.walk("/api/jobs", limit=2) == ids
    paused = await api.call("GET", "/api/jobs?status=paused")
    assert [j["id"] for j in paused.body["items"]] == [ids[1]]
    active = await api.call("GET", "/api/jobs?status=active&limit=500")
    assert [j["id"] for j in active.body["items"]] == [ids[0], *ids[2:]]
    for query, field in (
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=x", "limit"),
        ("cursor=@@", "cursor"),
        ("cursor=Zm9vOmJhcg", "cursor"),  # base64 of "foo:bar"
        ("status=gone", "status"),
    ):
        reply = await api.call("GET", f"/api/jobs?{query}")
        assert reply.status == 422 and reply.body["field"] == field, query


async def test_delete_removes_job_and_runs(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create()
    await api.call("POST", f"/api/jobs/{job['id']}/trigger")
    reply = await api.call("DELETE", f"/api/jobs/{job['id']}")
    assert reply.status == 204
    assert (await api.call("GET", f"/api/jobs/{job['id']}")).status == 404
    assert (await api.call("DELETE", f"/api/jobs/{job['id']}")).status == 404
    assert await pg_pool.fetchval("SELECT count(*) FROM runs") == 0


async def test_trigger_queues_a_manual_run_even_when_paused(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create(status="paused")
    t0 = datetime.now(UTC)
    reply = await api.call("POST", f"/api/jobs/{job['id']}/trigger")
    assert reply.status == 202
    run = reply.body
    assert (run["job_id"], run["state"], run["trigger"], run["attempt"]) == (job["id"], "queued", "manual", 1)
    assert run["scheduled_for"] == run["due_at"]
    assert t0 - timedelta(seconds=1) < _ts(run["scheduled_for"]) <= datetime.now(UTC)
    assert await pg_pool.fetchval("SELECT state FROM runs WHERE id = $1", run["id"]) == "queued"
    second = await api.call("POST", f"/api/jobs/{job['id']}/trigger")
    assert second.status == 202 and second.body["id"] != run["id"]

    got = await api.call("GET", f"/api/jobs/{job['id']}")
    assert got.body["last_run"]["id"] == second.body["id"]


async def test_every_write_notifies_in_its_transaction(api: Api, database_url: str) -> None:
    listener = await asyncpg.connect(database_url)
    notes: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener(JOBS_CHANNEL, lambda _c, _pid, _ch, payload: notes.put_nowait(payload))
    try:
        job = await api.create()
        jid = job["id"]
        await api.call("PATCH", f"/api/jobs/{jid}", json={"max_retries": 1})
        bad = await api.call("PATCH", f"/api/jobs/{jid}", json={"cron_expression": "x"})
        assert bad.status == 422  # rolled back: no notification for it
        await api.call("POST", f"/api/jobs/{jid}/pause")
        await api.call("POST", f"/api/jobs/{jid}/resume")
        await api.call("PATCH", f"/api/jobs/{jid}/toggle")
        await api.call("POST", f"/api/jobs/{jid}/trigger")
        await api.call("DELETE", f"/api/jobs/{jid}")
        ops = ["created", "updated", "paused", "resumed", "paused", "triggered", "deleted"]
        got = [await asyncio.wait_for(notes.get(), timeout=5) for _ in ops]
        assert got == [f'{{"op":"{op}","job_id":{jid}}}' for op in ops]
        assert notes.empty()
    finally:
        await listener.close()


async def test_a_page_of_big_payloads_stops_at_its_byte_budget(api: Api) -> None:
    """500 payloads at the 64 KiB bound would make a 32 MB page: the page ends at PAGE_PAYLOAD_BYTES
    and says where to go on, and walking the pages still yields every job once, in order."""
    blob = "x" * 60_000
    created = [(await api.create(name=f"big {i}", payload={"action": "a", "blob": blob}))["id"] for i in range(40)]
    first = await api.call("GET", "/api/jobs?limit=500")
    assert first.status == 200, first.body
    shown = len(first.body["items"])
    assert 1 <= shown < 40 and shown * 60_000 <= PAGE_PAYLOAD_BYTES + 60_000, shown
    assert first.body["next_cursor"] is not None
    assert await api.walk("/api/jobs", 500) == created
