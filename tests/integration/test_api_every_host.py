"""`hosts` through the API (runs on every host, cronos.every_host): stored, shown, edited, refused
with a 422 naming the field, described in the OpenAPI document; absent it is today's one run a tick."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from api.bodies import HOSTS_NEED_ALLOW
from cronos.settings import Settings
from tests.integration.api_client import Api, running_api


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def test_hosts_are_stored_shown_and_edited(api: Api, pg_pool: asyncpg.Pool) -> None:
    plain = await api.create(name="plain")
    assert plain.get("hosts") is None  # absent: one run per tick, as ever
    job = await api.create(name="logrotate", concurrency_policy="allow", hosts={"label": "rack=x", "count": 2})
    assert job["hosts"] == {"count": 2, "label": "rack=x"}
    assert await pg_pool.fetchval("SELECT hosts FROM jobs WHERE id = $1", job["id"]) == {"count": 2, "label": "rack=x"}

    every = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"hosts": {}})
    assert every.status == 200, every.body
    assert every.body["hosts"] == {}  # every executor of its queue
    assert every.body["labels"] == job["labels"] and every.body["concurrency_policy"] == "allow"  # untouched
    once = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"hosts": None})
    assert once.status == 200 and once.body.get("hosts") is None


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"hosts": {}}, HOSTS_NEED_ALLOW),  # the default policy, forbid
        ({"hosts": {"count": 0}, "concurrency_policy": "allow"}, "$.hosts.count"),
        ({"hosts": {"label": "rack"}, "concurrency_policy": "allow"}, "$.hosts.label"),
        ({"hosts": {"label": "rack\u0000=x"}, "concurrency_policy": "allow"}, "$.hosts.label"),  # PostgreSQL's jsonb
        ({"hosts": {"everywhere": True}, "concurrency_policy": "allow"}, "everywhere"),
    ],
)
async def test_bad_hosts_get_a_422_naming_the_field(
    api: Api, pg_pool: asyncpg.Pool, fields: dict[str, object], detail: str
) -> None:
    reply = await api.call(
        "POST",
        "/api/jobs",
        json={"name": "bad", "cron_expression": "* * * * *", "payload": {"action": "noop"}, **fields},
    )
    assert reply.status == 422, reply.body
    assert detail in str(reply.body)
    assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 0


async def test_the_openapi_document_describes_hosts(api: Api) -> None:
    doc = (await api.call("GET", "/openapi.json")).body
    schemas = doc["components"]["schemas"]
    assert set(schemas["Hosts"]["properties"]) == {"count", "label"}
    assert any("Hosts" in str(schemas[name]["properties"].get("hosts")) for name in ("JobCreate", "JobPatch"))


async def test_a_run_shows_its_host(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create(name="purge", concurrency_policy="allow", hosts={})
    run_id = await pg_pool.fetchval(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, host)"
        " VALUES ($1, now(), 1, 'schedule', 'queued', now(), 'node-a') RETURNING id",
        job["id"],
    )
    assert (await api.call("GET", f"/api/runs/{run_id}")).body["host"] == "node-a"
    listed = (await api.call("GET", f"/api/jobs/{job['id']}/runs")).body
    items = listed["items"] if isinstance(listed, dict) else listed
    assert [r["host"] for r in items] == ["node-a"]
