"""/api/concurrency-groups and a job's concurrency_group through the API (issue 25, item 5): create,
set a limit, show holders and waiters, delete; every refusal a 4xx naming the field."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from cronos.settings import Settings
from tests.integration.api_client import Api, running_api

JOB = {"name": "load", "cron_expression": "@yearly", "payload": {"action": "noop"}}


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def test_create_set_show_and_delete_a_group(api: Api, pg_pool: asyncpg.Pool) -> None:
    created = await api.call("PUT", "/api/concurrency-groups/warehouse", {"limit": 2})
    assert created.status == 201, created.body
    assert created.body["limit"] == 2 and created.body["holding"] == 0
    again = await api.call("PUT", "/api/concurrency-groups/warehouse", {"limit": 3})
    assert again.status == 200 and again.body["limit"] == 3

    job = await api.call("POST", "/api/jobs", {**JOB, "concurrency_group": "warehouse"})
    assert job.status == 201 and job.body["concurrency_group"] == "warehouse"
    listed = (await api.call("GET", "/api/concurrency-groups")).body["items"]
    assert [(g["name"], g["limit"], g["jobs"]) for g in listed] == [("warehouse", 3, 1)]
    shown = (await api.call("GET", "/api/concurrency-groups/warehouse")).body
    assert shown["members"] == [{"id": job.body["id"], "name": "load"}]
    assert shown["holders"] == [] and shown["waiters"] == []

    in_use = await api.call("DELETE", "/api/concurrency-groups/warehouse")
    assert in_use.status == 409, in_use.body
    out = await api.call("PATCH", f"/api/jobs/{job.body['id']}", {"concurrency_group": None})
    assert out.status == 200 and out.body["concurrency_group"] is None
    assert (await api.call("DELETE", "/api/concurrency-groups/warehouse")).status == 204
    assert (await api.call("GET", "/api/concurrency-groups/warehouse")).status == 404


async def test_a_raise_of_the_limit_wakes_the_waiting_runs_at_once(api: Api, pg_pool: asyncpg.Pool) -> None:
    await api.call("PUT", "/api/concurrency-groups/warehouse", {"limit": 1})
    job = (await api.call("POST", "/api/jobs", {**JOB, "concurrency_group": "warehouse"})).body
    run = await pg_pool.fetchval(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, waiting_for)"
        " VALUES ($1, now(), 1, 'manual', 'waiting', now(), 'warehouse') RETURNING id",
        job["id"],
    )
    await pg_pool.execute(
        "INSERT INTO concurrency_group_slots (run_id, group_name, job_id, scheduled_for)"
        " VALUES (0, 'warehouse', $1, now())",
        job["id"],
    )  # a slot whose run is gone: it does not count
    shown = (await api.call("GET", "/api/concurrency-groups/warehouse")).body
    assert shown["waiting"] == 1 and shown["waiters"][0]["run_id"] == run
    ticks = await api.call("GET", f"/api/runs/{run}")
    assert ticks.body["waiting_for"] == "warehouse" and ticks.body["state"] == "waiting"
    await api.call("PUT", "/api/concurrency-groups/warehouse", {"limit": 2})
    assert await pg_pool.fetchval("SELECT state FROM runs WHERE id = $1", run) == "queued"
    shown = (await api.call("GET", "/api/concurrency-groups/warehouse")).body
    assert [(h["run_id"], h["state"]) for h in shown["holders"]] == [(run, "queued")]


BAD = [
    ("PUT", "/api/concurrency-groups/warehouse", {"limit": 0}, 422, "$.limit"),
    ("PUT", "/api/concurrency-groups/warehouse", {"limit": 100_001}, 422, "$.limit"),
    ("PUT", "/api/concurrency-groups/warehouse", {"limit": "2"}, 422, "$.limit"),
    ("PUT", "/api/concurrency-groups/warehouse", {}, 422, "$.limit"),
    ("PUT", "/api/concurrency-groups/warehouse", {"limit": 2, "max": 3}, 422, "$.max"),
    ("PUT", "/api/concurrency-groups/no%20spaces", {"limit": 2}, 404, None),
    ("PUT", f"/api/concurrency-groups/{'x' * 65}", {"limit": 2}, 404, None),
    ("POST", "/api/jobs", {**JOB, "concurrency_group": "nowhere"}, 422, "$.concurrency_group"),
    ("POST", "/api/jobs", {**JOB, "concurrency_group": "a b"}, 422, "$.concurrency_group"),
    ("POST", "/api/jobs", {**JOB, "concurrency_group": ""}, 422, "$.concurrency_group"),
    ("DELETE", "/api/concurrency-groups/nowhere", None, 404, None),
]


async def test_bad_input_names_the_field_and_writes_nothing(api: Api, pg_pool: asyncpg.Pool) -> None:
    for method, path, body, status, field in BAD:
        reply = await api.call(method, path, body)
        assert reply.status == status, (path, body, reply.body)
        if field is not None:
            assert reply.body["field"] == field, (path, body, reply.body)
    assert await pg_pool.fetchval("SELECT count(*) FROM concurrency_groups") == 0
    assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 0
    job = (await api.call("POST", "/api/jobs", JOB)).body
    patched = await api.call("PATCH", f"/api/jobs/{job['id']}", {"concurrency_group": "nowhere"})
    assert patched.status == 422 and patched.body["field"] == "$.concurrency_group", patched.body
    assert "no concurrency group named 'nowhere'" in patched.body["detail"]


async def test_a_tick_waiting_for_its_group_says_so_in_the_ticks_api(api: Api, pg_pool: asyncpg.Pool) -> None:
    await api.call("PUT", "/api/concurrency-groups/warehouse", {"limit": 1})
    job = (await api.call("POST", "/api/jobs", {**JOB, "cron_expression": "* * * * * *", "status": "paused"})).body
    await api.call("PATCH", f"/api/jobs/{job['id']}", {"concurrency_group": "warehouse"})
    tick = await pg_pool.fetchval("SELECT date_trunc('second', now()) - interval '1 second'")
    await pg_pool.execute(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, waiting_for)"
        " VALUES ($1, $2, 1, 'schedule', 'waiting', $2, 'warehouse')",
        job["id"],
        tick,
    )
    since = tick.isoformat().replace("+00:00", "Z")
    ticks = (await api.call("GET", f"/api/jobs/{job['id']}/ticks?from={since}")).body["items"]
    (waiting,) = [t for t in ticks if t["runs"]]
    assert waiting["outcome"] == "pending", waiting
    assert waiting["reason"] == "waiting for concurrency group warehouse", waiting
    assert waiting["runs"][0]["waiting_for"] == "warehouse"
