"""Namespaces of jobs (issue 41, item 1) against a real API, PostgreSQL and Redis: a request that names
none acts on `default` as before; names are unique within a namespace; listings, selectors, the
console's overview and the runs view show one namespace; chains stay inside one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from cronos.settings import Settings
from tests.integration.api_client import SEED_JOB, Api, running_api


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _names(api: Api, path: str) -> list[str]:
    reply = await api.call("GET", path)
    assert reply.status == 200, reply.body
    return [item["name"] for item in reply.body["items"]]


async def test_default_namespace_and_a_second_one_side_by_side(api: Api, pg_pool: asyncpg.Pool) -> None:
    listed = await api.call("GET", "/api/namespaces")
    assert [n["name"] for n in listed.body["items"]] == ["default"]
    seed = await api.create()  # the seed's request: no namespace named
    assert seed["namespace"] == "default"

    missing = await api.call("POST", "/api/jobs?namespace=data", json=SEED_JOB)
    assert missing.status == 404 and "no namespace named 'data'" in missing.body["detail"]
    made = await api.call("PUT", "/api/namespaces/data")
    assert made.status == 201 and made.body["name"] == "data"
    assert (await api.call("PUT", "/api/namespaces/data")).status == 200  # exists: nothing changes

    # The same name in another namespace is another job; twice in one namespace is refused.
    twin = await api.call("POST", "/api/jobs?namespace=data", json={**SEED_JOB, "labels": {"team": "data"}})
    assert twin.status == 201 and twin.body["namespace"] == "data"
    again = await api.call("POST", "/api/jobs?namespace=data", json=SEED_JOB)
    assert again.status == 409 and "namespace 'data'" in again.body["detail"]
    assert (await api.call("POST", "/api/jobs", json=SEED_JOB)).status == 409

    assert await _names(api, "/api/jobs") == [SEED_JOB["name"]]
    data_jobs = (await api.call("GET", "/api/jobs?namespace=data")).body["items"]
    assert [j["id"] for j in data_jobs] == [twin.body["id"]]
    assert (await api.call("GET", "/api/jobs?namespace=data&selector=team%3Ddata")).body["items"][0]["id"] == twin.body[
        "id"
    ]
    assert await _names(api, "/api/jobs?selector=team%3Ddata") == []
    overview = await api.call("GET", "/api/jobs/overview?namespace=data")
    assert [j["id"] for j in overview.body["items"]] == [twin.body["id"]]
    assert [j["id"] for j in (await api.call("GET", "/api/jobs/overview")).body["items"]] == [seed["id"]]
    assert await _names(api, "/api/jobs?namespace=nobody") == []
    bad = await api.call("GET", "/api/jobs?namespace=Not_A_Name")
    assert bad.status == 422 and bad.body["field"] == "namespace"

    # By id, a job acts in its own namespace; a PATCH cannot move it.
    renamed = await api.call("PATCH", f"/api/jobs/{twin.body['id']}", json={"max_retries": 2})
    assert renamed.status == 200 and renamed.body["namespace"] == "data"
    assert (await api.call("PATCH", f"/api/jobs/{twin.body['id']}", json={"namespace": "default"})).status == 422

    # A bulk action by selector acts only within the namespace it names.
    bulk = await api.call("POST", "/api/jobs/bulk", json={"selector": "team=data", "action": "pause"})
    assert bulk.status == 200 and bulk.body["matched"] == 0
    bulk = await api.call("POST", "/api/jobs/bulk?namespace=data", json={"selector": "team=data", "action": "pause"})
    assert bulk.body["matched"] == 1

    # Runs belong to their job's namespace.
    for job in (seed, twin.body):
        assert (await api.call("POST", f"/api/jobs/{job['id']}/trigger")).status == 202
    runs = await api.call("GET", "/api/runs")
    assert {r["job_id"] for r in runs.body["items"]} == {seed["id"]}
    runs = await api.call("GET", "/api/runs?namespace=data")
    assert {r["job_id"] for r in runs.body["items"]} == {twin.body["id"]}

    # A chain stays within its namespace.
    child = await api.call(
        "POST", "/api/jobs", json={**SEED_JOB, "name": "after", "parents": [twin.body["id"]]}
    )
    assert child.status == 422 and "namespace 'data'" in child.body["detail"]

    # A namespace holding jobs is not deleted; `default` never is.
    assert (await api.call("DELETE", "/api/namespaces/data")).status == 409
    assert (await api.call("DELETE", "/api/namespaces/default")).status == 409
    assert (await api.call("DELETE", f"/api/jobs/{twin.body['id']}")).status == 204
    assert (await api.call("DELETE", "/api/namespaces/data")).status == 204
    audit = await pg_pool.fetch("SELECT action FROM audit_log WHERE subject = 'namespace' ORDER BY id")
    assert [r["action"] for r in audit] == ["created", "deleted"]
