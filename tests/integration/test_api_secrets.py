"""A write token must not walk off with a job's write-only secrets (issue 22, item 1): `***` is
put back only in the same kind of job, and for http jobs only while the URL's scheme, host,
port and path, the Host header (issue 36) and the method are unchanged. Real API, PostgreSQL,
Redis, executor and receivers on loopback (two ports: two origins)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import msgspec
import pytest
from aiohttp import web

from cronos.settings import Settings
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness

SECRETS = ("HSECRET-123", "k3y-value-9", "pa55word-77")
STORED = {
    "method": "POST",
    "headers": {"Authorization": "Bearer HSECRET-123", "X-Api-Key": "k3y-value-9", "Accept": "application/json"},
    "body": {"password": "pa55word-77", "n": 1},
}
SHOWN = {"headers": {"Authorization": "***", "X-Api-Key": "***", "Accept": "application/json"},
         "body": {"password": "***", "n": 1}}  # fmt: skip
AUTHORIZATION = "$.payload.headers.Authorization"


class Receiver:
    def __init__(self) -> None:
        self.seen: list[str] = []  # every request, as text: method, path, headers and body
        self.url = ""


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _receiver() -> tuple[web.AppRunner, Receiver]:
    found = Receiver()

    async def handle(request: web.Request) -> web.StreamResponse:
        found.seen.append(f"{request.method} {request.path_qs} {dict(request.headers)} {await request.text()}")
        return web.Response(text="ok")

    runner, port = await serve(handle, "127.0.0.1")
    found.url = f"http://127.0.0.1:{port}"
    return runner, found


@pytest.fixture
async def service() -> AsyncIterator[Receiver]:
    runner, found = await _receiver()
    try:
        yield found
    finally:
        await runner.cleanup()


@pytest.fixture
async def attacker() -> AsyncIterator[Receiver]:
    runner, found = await _receiver()
    try:
        yield found
    finally:
        await runner.cleanup()


def _problem(reply: Any, field: str) -> None:
    assert reply.status == 422, reply.body
    assert reply.body["field"] == field, reply.body
    assert not any(secret in str(reply.body) for secret in SECRETS)


async def _stored(pool: asyncpg.Pool, job_id: int) -> tuple[str, dict[str, Any]]:
    row = await pool.fetchrow("SELECT kind, payload FROM jobs WHERE id = $1", job_id)
    assert row is not None
    return row["kind"], row["payload"]


async def _run_now(harness: Harness, settings: Settings, job_id: int) -> None:
    await harness.queue(job_id)
    async with Executor(settings) as ex:
        await ex.run_once()


async def test_a_change_of_kind_carries_no_secret(
    api: Api, harness: Harness, settings: Settings, service: Receiver, attacker: Receiver
) -> None:
    """The reported attack: PATCH to a task aimed at the attacker with *** everywhere, then back
    to http at another path of the attacker, then run it. Every step that would carry a stored
    secret is refused, naming the field; the job keeps its secrets and its target."""
    job = await api.create(kind="http", payload={**STORED, "url": f"{service.url}/hook"})
    path = f"/api/jobs/{job['id']}"
    to_task = {"action": "x", "url": f"{attacker.url}/", **SHOWN}
    _problem(await api.call("PATCH", path, json={"kind": "task", "payload": to_task}), AUTHORIZATION)
    back = {**SHOWN, "url": f"{attacker.url}/stolen", "method": "POST"}
    _problem(await api.call("PATCH", path, json={"kind": "http", "payload": back}), "$.payload.url")
    # Nested secrets of a task move no more than an http job's: only the one *** left, in the body.
    only_body = {"action": "x", "url": f"{attacker.url}/", "body": {"password": "***"}}
    _problem(await api.call("PATCH", path, json={"kind": "task", "payload": only_body}), "$.payload.body.password")
    assert await _stored(harness.pool, job["id"]) == ("http", {**STORED, "url": f"{service.url}/hook"})

    await _run_now(harness, settings, job["id"])
    assert attacker.seen == []
    assert len(service.seen) == 1 and all(secret in service.seen[0] for secret in SECRETS)


async def test_task_secrets_do_not_follow_a_change_of_kind(api: Api, harness: Harness, service: Receiver) -> None:
    """Even to the very URL the task named: a task's secrets are its code's, not an http job's."""
    job = await api.create(payload={"action": "sync", "url": f"{service.url}/v1", **STORED})
    path = f"/api/jobs/{job['id']}"
    to_http = {**SHOWN, "url": f"{service.url}/v1", "method": "POST"}
    _problem(await api.call("PATCH", path, json={"kind": "http", "payload": to_http}), AUTHORIZATION)
    assert (await _stored(harness.pool, job["id"]))[0] == "task"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"url": "{service}/other"}, "$.payload.url"),  # same origin, another path
        ({"url": "{service}/hook", "method": "DELETE"}, "$.payload.method"),  # another method
        ({"url": "{attacker}/hook"}, "$.payload.url"),  # another origin
    ],
)
async def test_an_http_secret_stays_with_its_path_and_method(
    api: Api, harness: Harness, settings: Settings, service: Receiver, attacker: Receiver,
    change: dict[str, str], field: str,
) -> None:  # fmt: skip
    job = await api.create(kind="http", payload={**STORED, "url": f"{service.url}/hook"})
    path = f"/api/jobs/{job['id']}"
    moved = {**SHOWN, **{k: v.format(service=service.url, attacker=attacker.url) for k, v in change.items()}}
    _problem(await api.call("PATCH", path, json={"payload": moved}), field)
    # Re-entering the secret is how a job is aimed elsewhere; a query change keeps the secrets.
    same = {**SHOWN, "url": f"{service.url}/hook?page=2"}
    reply = await api.call("PATCH", path, json={"payload": same})
    assert reply.status == 200 and reply.body["payload"] == same
    await _run_now(harness, settings, job["id"])
    assert attacker.seen == [] and len(service.seen) == 1
    assert all(secret in service.seen[0] for secret in SECRETS)


async def test_a_task_payloads_target_keeps_its_secrets(api: Api, harness: Harness) -> None:
    """A task payload's `url`, `method`, `host` and `port` fields are its target: a secret sent back
    as *** is kept only while they are unchanged (compared as an http job's)."""
    payload = {"action": "sync", "target": {"url": "https://api.example.com/v1", "method": "POST"},
               "host": "db.example.com", "password": "pa55word-77"}  # fmt: skip
    job = await api.create(payload=payload)
    path = f"/api/jobs/{job['id']}"
    for moved in (
        {"target": {"url": "https://evil.example/v1", "method": "POST"}},
        {"target": {"url": "https://api.example.com/v2", "method": "POST"}},
        {"target": {"url": "https://api.example.com/v1", "method": "GET"}},
        {"host": "db.evil.example"},
    ):
        _problem(await api.call("PATCH", path, json={"payload": {**payload, **moved, "password": "***"}}),
                 "$.payload.password")  # fmt: skip
    kept = {**payload, "password": "***", "batch": 10}
    assert (await api.call("PATCH", path, json={"payload": kept})).status == 200
    assert (await _stored(harness.pool, job["id"]))[1] == {**payload, "batch": 10}


async def test_shell_secrets_do_not_follow_a_change_of_kind(settings: Settings, harness: Harness) -> None:
    async with running_api(msgspec.structs.replace(settings, allow_shell=True)) as admin:
        made = await admin.create(kind="shell", payload={"argv": ["true"], "env": {"API_TOKEN": "HSECRET-123"}})
        to_task = {"action": "x", "env": {"API_TOKEN": "***"}}
        reply = await admin.call("PATCH", f"/api/jobs/{made['id']}", json={"kind": "task", "payload": to_task})
        _problem(reply, "$.payload.env.API_TOKEN")
        assert (await _stored(harness.pool, made["id"]))[0] == "shell"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"headers": {**SHOWN["headers"], "Host": "tenant-b.example"}}, "$.payload.headers.Host"),  # the finding
        ({"headers": {**SHOWN["headers"], "host": "TENANT-B.example:80"}}, "$.payload.headers.Host"),
        ({"url": "https://{host}:{port}/hook"}, "$.payload.url"),  # scheme
        ({"url": "http://127.0.0.2:{port}/hook"}, "$.payload.url"),  # host
        ({"url": "http://{host}:{other}/hook"}, "$.payload.url"),  # port
    ],
)
async def test_secrets_stay_with_the_host_header_scheme_host_and_port_they_were_entered_with(
    api: Api, harness: Harness, settings: Settings, service: Receiver, attacker: Receiver,
    change: dict[str, Any], field: str,
) -> None:  # fmt: skip
    """Issue 36: a write token kept the `***` secrets and added `Host: tenant-b.example` (200), and the
    next run sent them to the same address under the other virtual host. Now 422 naming the field
    that moved them; the job keeps its secrets; re-entering them is how the job moves (200)."""
    job = await api.create(kind="http", payload={**STORED, "url": f"{service.url}/hook"})
    path = f"/api/jobs/{job['id']}"
    host, port = service.url.removeprefix("http://").split(":")
    other = attacker.url.rsplit(":", 1)[1]
    fill = {"host": host, "port": port, "other": other}
    moved = {**SHOWN, "url": f"{service.url}/hook",
             **{k: v.format(**fill) if isinstance(v, str) else v for k, v in change.items()}}  # fmt: skip
    reply = await api.call("PATCH", path, json={"payload": moved})
    _problem(reply, field)
    assert "re-enter" in reply.body["detail"]
    assert await _stored(harness.pool, job["id"]) == ("http", {**STORED, "url": f"{service.url}/hook"})

    entered = {**STORED, "url": f"{service.url}/hook",
               "headers": {**STORED["headers"], "Host": "tenant-b.example"}}  # fmt: skip
    reply = await api.call("PATCH", path, json={"payload": entered})
    assert reply.status == 200, reply.body
    await _run_now(harness, settings, job["id"])
    ((seen,),) = [service.seen]
    assert "'Host': 'tenant-b.example'" in seen and all(secret in seen for secret in SECRETS)
