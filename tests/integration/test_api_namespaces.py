"""Namespaces of jobs (issue 41, item 1) against a real API, PostgreSQL and Redis: a request that names
none acts on `default` as before; names are unique within a namespace; listings, selectors, the
console's overview and the runs view show one namespace; chains stay inside one."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import msgspec
import pytest

from cronos.cli import _parser
from cronos.client.apply_cli import run_apply
from cronos.client.jobs_file import ApplyInvalid
from cronos.settings import Settings, load_settings
from tests.integration.api_client import SEED_JOB, Api, running_api


def _file(names: str, namespace: str = "data") -> str:
    jobs = ", ".join(
        f'{{name: {n}, cron_expression: "0 * * * *", payload: {{action: reindex}}}}' for n in names.split(", ")
    )
    return f"namespace: {namespace}\njobs: [{jobs}]\n"


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
    child = await api.call("POST", "/api/jobs", json={**SEED_JOB, "name": "after", "parents": [twin.body["id"]]})
    assert child.status == 422 and "namespace 'data'" in child.body["detail"]

    # A namespace holding jobs is not deleted; `default` never is.
    assert (await api.call("DELETE", "/api/namespaces/data")).status == 409
    assert (await api.call("DELETE", "/api/namespaces/default")).status == 409
    assert (await api.call("DELETE", f"/api/jobs/{twin.body['id']}")).status == 204
    assert (await api.call("DELETE", "/api/namespaces/data")).status == 204
    audit = await pg_pool.fetch("SELECT action FROM audit_log WHERE subject = 'namespace' ORDER BY id")
    assert [r["action"] for r in audit] == ["created", "deleted"]


async def test_apply_acts_in_the_file_s_namespace_and_prunes_only_there(
    api: Api, settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (await api.call("PUT", "/api/namespaces/data")).status == 201
    kept = await api.create(name="nightly")  # default's job of the same name: not the file's
    client = msgspec.structs.replace(settings, api_url=api.base)

    def apply(path: Path, *, prune: bool = False, given: str = "default") -> int:
        args = argparse.Namespace(files=[str(path)], dry_run=False, prune=prune, selector=None)
        return run_apply(args, msgspec.structs.replace(client, namespace=given))

    first = tmp_path / "data.yaml"
    first.write_text(_file("nightly, hourly"))
    assert await asyncio.to_thread(apply, first) == 0
    assert await _names(api, "/api/jobs?namespace=data") == ["nightly", "hourly"]
    first.write_text(_file("hourly"))
    assert await asyncio.to_thread(apply, first, prune=True) == 0
    assert await _names(api, "/api/jobs?namespace=data") == ["hourly"]
    assert [j["id"] for j in (await api.call("GET", "/api/jobs")).body["items"]] == [kept["id"]]  # untouched
    capsys.readouterr()

    with pytest.raises(ApplyInvalid, match="names namespace 'data', but --namespace or CRONOS_NAMESPACE gives 'ops'"):
        await asyncio.to_thread(apply, first, given="ops")
    other = tmp_path / "ops.yaml"
    other.write_text(_file("x", "ops"))
    args = argparse.Namespace(files=[str(first), str(other)], dry_run=True, prune=False, selector=None)
    with pytest.raises(ApplyInvalid, match="one apply acts in one namespace"):
        await asyncio.to_thread(run_apply, args, client)


def test_the_cli_takes_namespace_from_its_flag_or_the_environment() -> None:
    parsed = _parser().parse_args(["jobs", "list", "--namespace", "data"])
    assert parsed.namespace == "data"
    assert _parser().parse_args(["jobs", "--namespace", "data", "list"]).namespace == "data"
    assert not hasattr(_parser().parse_args(["jobs", "list"]), "namespace")  # then CRONOS_NAMESPACE, else default
    assert load_settings({"CRONOS_NAMESPACE": "data"}, env_file=None).namespace == "data"
    assert load_settings({}, env_file=None).namespace == "default"


async def test_groups_calendars_and_channels_belong_to_a_namespace(api: Api) -> None:
    assert (await api.call("PUT", "/api/namespaces/data")).status == 201
    put = await api.call("PUT", "/api/concurrency-groups/warehouse?namespace=data", json={"limit": 2})
    assert put.status == 201 and put.body["namespace"] == "data"
    taken = await api.call("PUT", "/api/concurrency-groups/warehouse", json={"limit": 3})
    assert taken.status == 409 and "another namespace" in taken.body["detail"]
    assert (await api.call("GET", "/api/concurrency-groups")).body["items"] == []
    listed = await api.call("GET", "/api/concurrency-groups?namespace=data")
    assert [g["name"] for g in listed.body["items"]] == ["warehouse"]

    cal = await api.call("POST", "/api/calendars?namespace=data", json={"name": "holidays", "dates": ["2026-12-25"]})
    assert cal.status == 201 and cal.body["namespace"] == "data"
    assert (await api.call("PUT", "/api/calendars/holidays", json={"dates": []})).status == 409
    assert await _names(api, "/api/calendars") == []
    assert await _names(api, "/api/calendars?namespace=data") == ["holidays"]

    # A job names only its own namespace's group and calendars.
    foreign = await api.call("POST", "/api/jobs", json={**SEED_JOB, "concurrency_group": "warehouse"})
    assert foreign.status == 422 and foreign.body["field"] == "$.concurrency_group"
    assert "namespace 'data'" in foreign.body["detail"]
    refs = {"calendars": [{"name": "holidays", "mode": "exclude"}]}
    foreign = await api.call("POST", "/api/jobs", json={**SEED_JOB, **refs})
    assert foreign.status == 422 and foreign.body["field"] == "$.calendars[0].name"
    own = await api.call(
        "POST", "/api/jobs?namespace=data", json={**SEED_JOB, **refs, "concurrency_group": "warehouse"}
    )
    assert own.status == 201, own.body
    seed = await api.create()
    changed = await api.call("PATCH", f"/api/jobs/{seed['id']}", json={"concurrency_group": "warehouse"})
    assert changed.status == 422 and changed.body["field"] == "$.concurrency_group"

    channel = {"kind": "webhook", "name": "data-hook", "url": "https://hooks.example.com/data"}
    made = await api.call("POST", "/api/channels?namespace=data", json=channel)
    assert made.status == 201 and made.body["namespace"] == "data"
    assert await _names(api, "/api/channels") == []
    assert await _names(api, "/api/channels?namespace=data") == ["data-hook"]


async def test_a_path_no_namespace_can_have_is_not_a_resource(api: Api) -> None:
    for method in ("GET", "PUT", "DELETE"):
        reply = await api.call(method, "/api/namespaces/Not_A_Name")
        assert reply.status == 404 and "no namespace can be named" in reply.body["detail"], method
    assert (await api.call("GET", "/api/namespaces/nobody")).status == 404
    assert (await api.call("DELETE", "/api/namespaces/nobody")).status == 404
