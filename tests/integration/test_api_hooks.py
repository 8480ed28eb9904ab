"""Trigger URLs (issue 40, item 7): create / list / revoke, and POST /hooks/{id} starting a run with no
API token. Real API, PostgreSQL, Redis, the leader's outbox and a real executor."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import msgspec
import pytest

from cronos import tasks, webhooks
from cronos.settings import Settings
from cronos.store.tokens import TokenStore
from executor.service import Executor
from tests.integration.api_client import Api, Reply, running_api
from tests.integration.ledger_helpers import Harness
from tests.waiting import wait_for

PROBE = "hook-probe"
SHELL_JOB = {"name": "sh", "cron_expression": "@daily", "kind": "shell", "payload": {"argv": ["true"]}}


@pytest.fixture
def seen() -> Iterator[list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    @tasks.task(PROBE, replace=True)
    async def probe(payload: dict[str, Any], ctx: tasks.RunContext) -> dict[str, Any]:
        calls.append(payload)
        return {"ok": True}

    yield calls
    tasks.unregister(PROBE)


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(msgspec.structs.replace(settings, allow_shell=True)) as client:
        yield client


async def _create(api: Api, job_id: int, token: str | None = None, **fields: Any) -> Reply:
    return await api.call("POST", f"/api/jobs/{job_id}/triggers", json={"name": "ci", **fields}, token=token)


async def _hook(api: Api, url: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Reply:
    # No API token: the hook's own headers only (the client would add none: api.token is unset).
    sent = {"Content-Type": "application/json", **(headers or {})}
    return await api.call("POST", url, data=body or None, headers=sent)


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _signed(secret: str, body: bytes, msg_id: str = "msg_1", at: int | None = None) -> dict[str, str]:
    return webhooks.signature_headers(secret, msg_id, int(time.time()) if at is None else at, body)


def _problem(reply: Reply, status: int, secret: str, field: str | None = None) -> None:
    assert reply.status == status, reply.body
    if field is not None:
        assert reply.body["field"] == field, reply.body
    assert secret not in str(reply.body)


async def test_a_hook_starts_a_run_that_runs_with_the_bodys_inputs(
    api: Api, harness: Harness, settings: Settings, seen: list[dict[str, Any]]
) -> None:
    job = await api.create(name="ci-target", payload={"action": PROBE, "ref": "main"})
    created = await _create(api, job["id"])
    assert created.status == 201, created.body
    secret, url = created.body["secret"], created.body["url"]
    assert url == f"/hooks/{created.body['id']}" and secret.startswith("whsec_")

    reply = await _hook(api, url, b'{"payload": {"ref": "v1.2"}}', _bearer(secret))
    assert reply.status == 202, reply.body
    run = reply.body
    assert (run["trigger"], run["inputs"]) == ("manual", {"ref": "v1.2"})
    async with harness.outbox():

        async def pushed() -> bool:
            return bool(
                await harness.pool.fetchval("SELECT pushed_epoch IS NOT NULL FROM runs WHERE id = $1", run["id"])
            )

        await wait_for(pushed, timeout=5, what="the hook's run pushed")
        async with Executor(settings) as executor:
            await executor.run_once()
    assert await harness.state(run["id"]) == "completed"
    assert seen == [{"action": PROBE, "ref": "v1.2"}]

    # Listed without its secret; the job's history names who made it and who triggered.
    listed = (await api.call("GET", f"/api/jobs/{job['id']}/triggers")).body["items"]
    assert [t["name"] for t in listed] == ["ci"] and secret not in str(listed)
    history = (await api.call("GET", f"/api/jobs/{job['id']}/history")).body["items"]
    actions = {(e["actor"], e["action"]) for e in history}
    assert ("local", "trigger-created") in actions and (f"trigger:{created.body['id']}", "triggered") in actions
    assert secret not in str(history)


async def test_refusals(api: Api, harness: Harness) -> None:
    job = await api.create(name="guarded", payload={"action": "noop"})
    created = (await _create(api, job["id"])).body
    secret, url = created["secret"], created["url"]

    _problem(await _hook(api, url), 401, secret)
    _problem(await _hook(api, url, headers=_bearer(secret[:-2] + "AA")), 401, secret)
    # The body is the manual trigger's, checked the same way: 422 naming the field, nothing queued.
    _problem(await _hook(api, url, b'{"scheduled_for": "2999-01-01T00:00:00Z"}', _bearer(secret)), 422,
             secret, "$.scheduled_for")  # fmt: skip
    _problem(await _hook(api, url, b'{"nope": 1}', _bearer(secret)), 422, secret, "$.nope")
    assert await harness.pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", job["id"]) == 0

    # One call a minute: the next is 429 with Retry-After (a third call at most, should a minute
    # boundary fall between the first two).
    limited = (await _create(api, job["id"], name="once", rate_per_minute=1)).body
    replies = []
    for _ in range(3):
        replies.append(await _hook(api, limited["url"], headers=_bearer(limited["secret"])))
        if replies[-1].status == 429:
            break
    assert [r.status for r in replies][-1] == 429 and replies[0].status == 202, [r.body for r in replies]
    assert 1 <= int(replies[-1].headers["Retry-After"]) <= 60

    revoked = await api.call("DELETE", f"/api/jobs/{job['id']}/triggers/{created['id']}")
    assert revoked.status == 204
    _problem(await _hook(api, url, headers=_bearer(secret)), 404, secret)
    listed = (await api.call("GET", f"/api/jobs/{job['id']}/triggers")).body["items"]
    assert [t["revoked_at"] is not None for t in listed] == [True, False]
    again = await api.call("DELETE", f"/api/jobs/{job['id']}/triggers/{created['id']}")
    assert again.status == 404, again.body


async def test_a_signed_trigger_checks_the_signature_and_refuses_a_replay(api: Api, harness: Harness) -> None:
    job = await api.create(name="signed", payload={"action": "noop"})
    created = (await _create(api, job["id"], signed=True)).body
    secret, url = created["secret"], created["url"]
    body = b'{"payload": {"ref": "abc"}}'

    # The secret itself is no way in: a signed trigger takes only signatures.
    _problem(await _hook(api, url, body, _bearer(secret)), 401, secret)
    _problem(await _hook(api, url, body, _signed(secret, b'{"payload": {"ref": "evil"}}')), 401, secret)
    _problem(await _hook(api, url, body, _signed(secret, body, at=int(time.time()) - 3600)), 401, secret)

    ok = await _hook(api, url, body, _signed(secret, body, "msg_a"))
    assert ok.status == 202, ok.body
    _problem(await _hook(api, url, body, _signed(secret, body, "msg_a")), 409, secret)
    assert (await _hook(api, url, body, _signed(secret, body, "msg_b"))).status == 202
    assert await harness.pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", job["id"]) == 2


async def test_shell_jobs_need_an_admins_trigger(api: Api, pg_pool: asyncpg.Pool) -> None:
    tokens = TokenStore(pg_pool)
    writer = (await tokens.create("writer", ("write",), None, actor="cli"))[1]
    admin = (await tokens.create("boss", ("admin",), None, actor="cli"))[1]
    shell = await api.call("POST", "/api/jobs", json=SHELL_JOB, token=admin)
    assert shell.status == 201, shell.body
    refused = await _create(api, shell.body["id"], token=writer)
    assert refused.status == 403, refused.body
    made = await _create(api, shell.body["id"], token=admin)
    assert made.status == 201 and made.body["admin"] is True, made.body
    fired = await _hook(api, made.body["url"], headers=_bearer(made.body["secret"]))
    assert fired.status == 202, fired.body

    # A write token's trigger on a task job acts as write: once its job turns shell, it starts nothing.
    task = await api.call("POST", "/api/jobs", json={**SHELL_JOB, "name": "t", "kind": "task",
                                                     "payload": {"action": "noop"}}, token=admin)  # fmt: skip
    mine = (await _create(api, task.body["id"], token=writer)).body
    assert mine["admin"] is False
    changed = await api.call("PATCH", f"/api/jobs/{task.body['id']}", json={"kind": "shell",
                             "payload": {"argv": ["true"]}}, token=admin)  # fmt: skip
    assert changed.status == 200, changed.body
    _problem(await _hook(api, mine["url"], headers=_bearer(mine["secret"])), 403, mine["secret"])


async def test_bad_input_to_the_management_routes(api: Api) -> None:
    job = await api.create(name="named")
    assert (await _create(api, job["id"], name="bad name")).body["field"] == "$.name"
    assert (await _create(api, job["id"], rate_per_minute=0)).body["field"] == "$.rate_per_minute"
    assert (await _create(api, 999_999)).status == 404
    assert (await api.call("DELETE", f"/api/jobs/{job['id']}/triggers/12345")).status == 404
    assert (await _hook(api, "/hooks/12345")).status == 404
