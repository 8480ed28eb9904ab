"""Run now with inputs (issue 24, item 5): POST /api/jobs/{id}/trigger with payload overrides and a
past tick's logical date. Real API, PostgreSQL, Redis, the leader's outbox and a real executor."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest
from aiohttp import web

from cronos import inputs, tasks
from cronos.settings import Settings
from cronos.store.epoch import EpochStore
from cronos.store.partitions import PartitionStore
from cronos.store.tokens import TokenStore
from executor.service import Executor
from tests.integration.api_client import Api, Reply, running_api
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness
from tests.waiting import wait_for

PROBE = "trigger-probe"
SECRET_HEADER = "Bearer TRIG-SECRET-42"


class Seen:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_first = False


@pytest.fixture
def seen() -> Iterator[Seen]:
    found = Seen()

    @tasks.task(PROBE, replace=True)
    async def probe(payload: dict[str, Any], ctx: tasks.RunContext) -> dict[str, Any]:
        found.calls.append({"payload": payload, "tick": ctx.scheduled_for, "key": ctx.idempotency_key,
                            "attempt": ctx.attempt})  # fmt: skip
        if found.fail_first and ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return {"ok": True}

    yield found
    tasks.unregister(PROBE)


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _trigger(api: Api, job_id: int, body: Any = None, **kw: Any) -> Reply:
    return await api.call("POST", f"/api/jobs/{job_id}/trigger", json=body, **kw)


async def _pushed(harness: Harness, run_id: int) -> None:
    async def pushed() -> bool:
        return bool(await harness.pool.fetchval("SELECT pushed_epoch IS NOT NULL FROM runs WHERE id = $1", run_id))

    await wait_for(pushed, timeout=5, what=f"run {run_id} pushed")


async def _execute(harness: Harness, settings: Settings, run_id: int) -> str:
    """The run, pushed by the leader's outbox, executed by a real executor; its end state."""
    async with harness.outbox():
        await _pushed(harness, run_id)
        async with Executor(settings) as executor:
            await executor.run_once()
    return await harness.state(run_id)


async def _past_tick(api: Api, job: dict[str, Any]) -> datetime:
    """A tick of an every-second job after its creation, once it is past."""
    created = datetime.fromisoformat(job["created_at"])
    tick = created.replace(microsecond=0) + timedelta(seconds=1)

    async def past() -> bool:
        return datetime.now(UTC) > tick + timedelta(milliseconds=50)

    await wait_for(past, timeout=3, what="a tick to pass")
    return tick


def _problem(reply: Reply, status: int, field: str | None = None) -> None:
    assert reply.status == status, reply.body
    if field is not None:
        assert reply.body["field"] == field, reply.body
    assert "TRIG-SECRET" not in str(reply.body)


async def test_a_task_run_gets_its_overrides_and_the_ticks_logical_date(
    api: Api, harness: Harness, settings: Settings, seen: Seen
) -> None:
    payload = {"action": PROBE, "target": "users", "opts": {"full": False, "batch": 10}}
    job = await api.create(name="rerun", cron_expression="* * * * * *", status="paused", payload=payload)
    tick = await _past_tick(api, job)
    body = {"payload": {"target": "orders", "opts": {"full": True}}, "scheduled_for": tick.isoformat()}
    reply = await _trigger(api, job["id"], body)
    assert reply.status == 202, reply.body
    run = reply.body
    assert (run["trigger"], run["attempt"], run["inputs"]) == ("manual", 1, body["payload"])
    assert datetime.fromisoformat(run["scheduled_for"]) == tick

    assert await _execute(harness, settings, run["id"]) == "completed"
    got = seen.calls[-1]
    assert got["payload"] == {"action": PROBE, "target": "orders", "opts": {"full": True, "batch": 10}}
    assert got["tick"] == tick and got["attempt"] == 1
    assert got["key"] == f"{job['id']}:{tick.isoformat()}" == tasks.idempotency_key(job["id"], tick)
    shown = (await api.call("GET", f"/api/runs/{run['id']}")).body
    assert (shown["inputs"], shown["state"]) == (body["payload"], "completed")

    # Again, without overrides: the tick's next attempt, with the job's own payload.
    again = await _trigger(api, job["id"], {"scheduled_for": tick.isoformat()})
    assert again.status == 202 and (again.body["attempt"], again.body["inputs"]) == (2, None), again.body
    assert await _execute(harness, settings, again.body["id"]) == "completed"
    assert seen.calls[-1]["payload"] == job["payload"] and seen.calls[-1]["key"] == got["key"]
    assert (await api.call("GET", f"/api/runs/{again.body['id']}")).body["inputs"] is None


async def test_a_retry_keeps_its_runs_inputs(api: Api, harness: Harness, settings: Settings, seen: Seen) -> None:
    seen.fail_first = True
    job = await api.create(name="flaky", payload={"action": PROBE}, max_retries=1, retry_backoff_s=0)
    reply = await _trigger(api, job["id"], {"payload": {"mode": "repair"}})
    assert reply.status == 202, reply.body
    async with harness.outbox(), Executor(settings) as executor:
        await _pushed(harness, reply.body["id"])
        await executor.run_once()
        assert await harness.state(reply.body["id"]) == "failed"
        retry = await harness.pool.fetchrow("SELECT id, trigger FROM runs WHERE job_id = $1 AND attempt = 2", job["id"])
        assert retry is not None and retry["trigger"] == "retry"
        await _pushed(harness, retry["id"])
        await executor.run_once()
        assert await harness.state(retry["id"]) == "completed"
    assert [c["payload"] for c in seen.calls] == [{"action": PROBE, "mode": "repair"}] * 2
    assert [c["attempt"] for c in seen.calls] == [1, 2] and seen.calls[0]["key"] == seen.calls[1]["key"]
    assert (await api.call("GET", f"/api/runs/{retry['id']}")).body["inputs"] == {"mode": "repair"}


async def test_an_empty_body_keeps_todays_trigger(api: Api, harness: Harness) -> None:
    job = await api.create(name="plain")
    for body in (None, {}):
        reply = await _trigger(api, job["id"], body)
        assert reply.status == 202, reply.body
        assert "inputs" not in reply.body and (reply.body["attempt"], reply.body["trigger"]) == (1, "manual")
        shown = await api.call("GET", f"/api/runs/{reply.body['id']}")
        assert shown.body["inputs"] is None
    assert await harness.pool.fetchval("SELECT count(*) FROM run_inputs") == 0
    history = (await api.call("GET", f"/api/jobs/{job['id']}/history")).body["items"]
    assert next(e["detail"] for e in history if e["action"] == "triggered").keys() == {"run_id"}


async def test_an_http_override_is_checked_and_sent_with_the_ticks_idempotency_key(
    api: Api, harness: Harness, settings: Settings
) -> None:
    requests: list[tuple[str, str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        requests.append((request.path, request.headers.get("Idempotency-Key", ""), await request.text()))
        return web.Response(text="ok")

    runner, port = await serve(handle, "127.0.0.1")
    try:
        job = await api.create(
            name="hook", kind="http", payload={"url": f"http://127.0.0.1:{port}/a", "body": {"n": 1}}
        )
        for url in ("http://169.254.169.254/latest/meta-data", "http://[::1]:80/", "ftp://example.com/"):
            _problem(await _trigger(api, job["id"], {"payload": {"url": url}}), 422, "$.payload.url")
        _problem(await _trigger(api, job["id"], {"payload": {"method": "BREW"}}), 422, "$.payload.method")
        _problem(await _trigger(api, job["id"], {"payload": {"timeout_s": -1}}), 422, "$.payload.timeout_s")
        overrides = {"url": f"http://127.0.0.1:{port}/b", "body": {"n": 2}, "expect_status": [200.0]}
        reply = await _trigger(api, job["id"], {"payload": overrides})
        assert reply.status == 202 and reply.body["inputs"]["expect_status"] == [200], reply.body  # as a job's
        assert await _execute(harness, settings, reply.body["id"]) == "completed"
    finally:
        await runner.cleanup()
    tick = datetime.fromisoformat(reply.body["scheduled_for"])
    assert requests == [("/b", f"{job['id']}:{tick.isoformat()}", '{"n":2}')]


async def test_secrets_cannot_be_overridden_added_or_sent_elsewhere(api: Api, harness: Harness) -> None:
    payload = {"url": "https://hooks.example.com/in?token=QSECRET-9", "method": "POST",
               "headers": {"Authorization": SECRET_HEADER, "X-Env": "prod"},
               "body": {"password": "pw-SECRET", "n": 1}}  # fmt: skip
    job = await api.create(name="secretive", kind="http", payload=payload)
    refused = {
        "$.payload.headers.Authorization": {"headers": {"Authorization": "Bearer mine"}},
        "$.payload.headers.authorization": {"headers": {"authorization": None}},
        "$.payload.headers": {"headers": None},
        "$.payload.body.password": {"body": {"password": "x"}},
        "$.payload.url": {"url": "https://hooks.example.com/in?token=other"},
        "$.payload.headers.X-Api-Key": {"headers": {"X-Api-Key": "new-key"}},
        "$.payload.body.extra.secret": {"body": {"extra": {"secret": "s"}}},
        "$.payload.method": {"method": "PUT"},
        # Where the secrets go is the job's alone (issue 36): its Host header and redirect policy.
        "$.payload.headers.Host": {"headers": {"Host": "tenant-b.example"}},
        "$.payload.follow_redirects": {"follow_redirects": True},
        "$.payload.secrets_follow_redirects": {"secrets_follow_redirects": True},
    }
    for field, overrides in refused.items():
        _problem(await _trigger(api, job["id"], {"payload": overrides}), 422, field)
    assert await harness.pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", job["id"]) == 0

    ok = await _trigger(api, job["id"], {"payload": {"headers": {"X-Env": "staging"}, "body": {"n": 2}}})
    assert ok.status == 202, ok.body
    assert ok.body["inputs"] == {"headers": {"X-Env": "staging"}, "body": {"n": 2}}
    stored = await harness.pool.fetchval("SELECT payload FROM run_inputs WHERE run_id = $1", ok.body["id"])
    assert "SECRET" not in msgspec.json.encode(stored).decode()
    entry = next(e for e in (await api.call("GET", f"/api/jobs/{job['id']}/history")).body["items"]
                 if e["action"] == "triggered")  # fmt: skip
    assert entry["detail"] == {"run_id": ok.body["id"], "scheduled_for": ok.body["scheduled_for"], "attempt": 1,
                               "payload": ok.body["inputs"]}  # fmt: skip
    assert entry["actor"] == "local"


async def test_the_executor_sends_no_secret_under_an_inputs_host(
    api: Api, harness: Harness, settings: Settings
) -> None:
    """Defence in depth (issue 36): inputs that would move the secrets (a Host header here, stored as
    if the API had let them through) fail the run before anything is sent; the job's own run goes."""
    requests: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        requests.append(dict(request.headers))
        return web.Response(text="ok")

    runner, port = await serve(handle, "127.0.0.1")
    try:
        payload = {"url": f"http://127.0.0.1:{port}/in", "headers": {"Authorization": SECRET_HEADER}}
        job = await api.create(name="hosted", kind="http", payload=payload)
        reply = await _trigger(api, job["id"], {"payload": {"headers": {"X-Env": "staging"}}})
        assert reply.status == 202, reply.body
        await harness.pool.execute(
            "UPDATE run_inputs SET payload = $2 WHERE run_id = $1", reply.body["id"],
            {"headers": {"Host": "tenant-b.example"}},
        )  # fmt: skip
        assert await _execute(harness, settings, reply.body["id"]) == "failed"
        assert requests == []
        run = (await api.call("GET", f"/api/runs/{reply.body['id']}")).body
        assert run["error"] == (
            "refused: this run's $.payload.headers.Host differs from the job's own, and the job's secrets go only"
            " where they were entered (a run's inputs may not move them); nothing was sent"
        )
        plain = await _trigger(api, job["id"])
        assert await _execute(harness, settings, plain.body["id"]) == "completed"
    finally:
        await runner.cleanup()
    ((headers,),) = [requests]
    assert headers["Authorization"] == SECRET_HEADER and headers["Host"] == f"127.0.0.1:{port}"


async def test_a_rerun_needs_a_past_tick_whose_runs_ended(api: Api, harness: Harness, seen: Seen) -> None:
    job = await api.create(name="ticks", cron_expression="* * * * * *", status="paused", payload={"action": PROBE})
    tick = await _past_tick(api, job)
    created = datetime.fromisoformat(job["created_at"])
    for when, reason in (
        (tick - timedelta(milliseconds=1), inputs.NOT_A_TICK),
        (created.replace(microsecond=0) - timedelta(seconds=5), inputs.BEFORE_CREATED),
        (datetime.now(UTC) + timedelta(hours=1), inputs.IN_FUTURE),
    ):
        reply = await _trigger(api, job["id"], {"scheduled_for": when.isoformat()})
        _problem(reply, 422, "$.scheduled_for")
        assert reason in reply.body["detail"]
    _problem(await _trigger(api, job["id"], {"scheduled_for": "2026-01-01T00:00:00"}), 422, "$.scheduled_for")
    _problem(await _trigger(api, job["id"], {"payload": {"action": PROBE}, "x": 1}), 422, "$.x")
    first = await _trigger(api, job["id"], {"scheduled_for": tick.isoformat()})
    assert first.status == 202, first.body
    busy = await _trigger(api, job["id"], {"scheduled_for": tick.isoformat()})  # the first is still queued
    _problem(busy, 409)
    assert f"run {first.body['id']}" in busy.body["detail"]
    # A manual run's own tick (not a schedule tick) may be re-run too, once it ended.
    await harness.pool.execute(
        "UPDATE runs SET state = 'skipped', skip_reason = 'test', finished_at = now() WHERE id = $1", first.body["id"]
    )
    plain = (await _trigger(api, job["id"])).body
    await harness.pool.execute(
        "UPDATE runs SET state = 'skipped', skip_reason = 'test', finished_at = now() WHERE id = $1", plain["id"]
    )
    again = await _trigger(api, job["id"], {"scheduled_for": plain["scheduled_for"]})
    assert again.status == 202 and again.body["attempt"] == 2, again.body
    assert (await _trigger(api, 99999, {"scheduled_for": tick.isoformat()})).status == 404


async def test_scopes(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    tokens = TokenStore(pg_pool)
    reader = (await tokens.create("reader", ("read",), None, actor="cli"))[1]
    writer = (await tokens.create("writer", ("write",), None, actor="cli"))[1]
    admin = (await tokens.create("boss", ("admin",), None, actor="cli"))[1]
    shell_job = {"name": "sh", "cron_expression": "@daily", "kind": "shell", "payload": {"argv": ["true"]}}
    async with running_api(msgspec.structs.replace(settings, allow_shell=True)) as api:
        task = await api.call(
            "POST",
            "/api/jobs",
            json={**shell_job, "name": "t", "kind": "task", "payload": {"action": "noop"}},
            token=writer,
        )
        shell = await api.call("POST", "/api/jobs", json=shell_job, token=admin)
        body = {"payload": {"extra": 1}}
        refused = await _trigger(api, task.body["id"], body, token=reader)
        assert refused.status == 403 and "`write`" in refused.body["detail"], refused.body
        assert (await _trigger(api, task.body["id"], body, token=writer)).status == 202
        argv = {"payload": {"argv": ["cat", "/etc/shadow"]}}
        refused = await _trigger(api, shell.body["id"], argv, token=writer)
        assert refused.status == 403 and "`admin`" in refused.body["detail"], refused.body
        assert (await _trigger(api, shell.body["id"], argv, token=admin)).status == 202
        env = {"payload": {"env": {"LD_PRELOAD": "/tmp/x.so"}}}
        _problem(await _trigger(api, shell.body["id"], env, token=admin), 422, "$.payload.env.LD_PRELOAD")
    assert await pg_pool.fetchval("SELECT count(*) FROM run_inputs") == 2


async def test_retention_prunes_inputs_past_it(api: Api, harness: Harness, pg_pool: asyncpg.Pool) -> None:
    job = await api.create(name="kept")
    for overrides in ({"n": 1}, {"n": 2}):
        assert (await _trigger(api, job["id"], {"payload": overrides})).status == 202
    await pg_pool.execute("UPDATE run_inputs SET scheduled_for = scheduled_for - interval '40 days', "
                          "created_at = created_at - interval '40 days' WHERE payload = '{\"n\": 1}'")  # fmt: skip
    epoch = (await EpochStore(pg_pool).take("test")).epoch
    await PartitionStore(pg_pool).purge_default(epoch, datetime.now(UTC) - timedelta(days=30))
    assert [r["payload"] for r in await pg_pool.fetch("SELECT payload FROM run_inputs")] == [{"n": 2}]
