"""Every route that can make a shell job run, by token, against a real API (issue 36, item 2).

The write routes come from the API's own OpenAPI document: each is either probed here or listed
with why it cannot make a job run, so a new route cannot ship unlisted. A write token is refused
(403 naming scope admin) on an admin's shell job itself and, where the route can make a job run,
on a task job whose chain runs it; an admin is allowed everywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from cronos.settings import Settings
from tests.integration.api_client import SEED_JOB, Api, Reply, running_api
from tests.integration.test_api_auth import SHELL_JOB, _forbidden, _token, _with

_WRITES = ("POST", "PUT", "PATCH", "DELETE")
_NOW = datetime.now(UTC)
_BACKFILL = {"from": (_NOW - timedelta(hours=1)).isoformat(), "to": _NOW.isoformat(), "dry_run": True}


@dataclass(frozen=True)
class Target:
    job: int
    run: int
    label: str  # the selector that selects the job alone


@dataclass(frozen=True)
class Probe:
    method: str
    path: str  # as in the OpenAPI document
    starts_runs: bool  # refused on a job whose chain runs a shell job, not only on the shell job
    request: Callable[[Target], tuple[str, Any]]  # the path and body for a target


def _job(suffix: str = "", body: Any = None) -> Callable[[Target], tuple[str, Any]]:
    return lambda t: (f"/api/jobs/{t.job}{suffix}", body)


def _bulk(action: str) -> Callable[[Target], tuple[str, Any]]:
    return lambda t: ("/api/jobs/bulk", {"selector": t.label, "action": action})


# Every write route that acts on a job or a run. Order: the admin pass runs them in this order.
PROBES = (
    Probe("PATCH", "/api/jobs/{id}", True, _job("", {"cron_expression": "* * * * * *"})),
    Probe("PATCH", "/api/jobs/{id}/toggle", True, _job("/toggle")),
    Probe("POST", "/api/jobs/{id}/resume", True, _job("/resume")),
    Probe("POST", "/api/jobs/{id}/trigger", True, _job("/trigger")),
    Probe("POST", "/api/jobs/{id}/triggers", True, _job("/triggers", {"name": "probe"})),  # a trigger URL starts runs
    Probe("POST", "/api/jobs/{id}/backfill", True, _job("/backfill", _BACKFILL)),
    Probe("POST", "/api/jobs/bulk", True, _bulk("resume")),
    Probe("POST", "/api/jobs/bulk", True, _bulk("trigger")),
    Probe("POST", "/api/jobs/bulk", False, _bulk("pause")),
    Probe("POST", "/api/jobs/{id}/pause", False, _job("/pause")),
    Probe("POST", "/api/jobs/{id}/rotate-secret", False, _job("/rotate-secret")),
    Probe("POST", "/api/runs/{id}/cancel", False, lambda t: (f"/api/runs/{t.run}/cancel", None)),
    Probe("POST", "/api/runs/{id}/retry", True, lambda t: (f"/api/runs/{t.run}/retry", None)),
    Probe("DELETE", "/api/jobs/{id}", False, _job()),
)
# Creating a job: probed on its own (a new job has no chain below it).
CREATE = ("POST", "/api/jobs")
# Write routes that act on no job or run, each with why it cannot make one run.
CANNOT_START_A_JOB = {
    ("POST", "/api/tokens"): "admin only",
    ("DELETE", "/api/tokens/{name}"): "admin only",
    ("POST", "/api/channels"): "admin only",
    ("PATCH", "/api/channels/{id}"): "admin only",
    ("DELETE", "/api/channels/{id}"): "admin only",
    ("POST", "/api/channels/{id}/test"): "admin only; sends a test notification",
    ("PUT", "/api/concurrency-groups/{name}"): "a limit on runs at once; queues no run, changes no schedule",
    ("DELETE", "/api/concurrency-groups/{name}"): "refused while a job names the group",
    ("POST", "/api/calendars"): "a named set of days; a job's calendar only holds back its ticks",
    ("PUT", "/api/calendars/{name}"): "as above",
    ("DELETE", "/api/calendars/{name}"): "refused while a job names it",
    ("POST", "/api/blackouts"): "holds runs back, starts none",
    ("DELETE", "/api/blackouts/{id}"): "ends a hold on an admin's schedule; queues no run (see the report)",
    ("DELETE", "/api/jobs/{id}/triggers/{trigger}"): "revokes a trigger URL; starts nothing",
    ("POST", "/hooks/{id}"): "no API token: a trigger URL acts with its creator's authority (test_api_hooks.py)",
    ("POST", "/auth/logout"): "ends the caller's own console session; starts nothing",
    ("PUT", "/api/namespaces/{name}"): "admin only; an empty namespace holds no job",
    ("DELETE", "/api/namespaces/{name}"): "admin only; refused while a job lives in it",
}


@contextlib.asynccontextmanager
async def shell_api(settings: Settings, pg_pool: asyncpg.Pool) -> AsyncIterator[tuple[Api, str, str]]:
    """An API that allows shell jobs, a write token and an admin token."""
    writer = await _token(pg_pool, "writer", "write")
    admin = await _token(pg_pool, "boss", "admin")
    async with running_api(_with(settings, allow_shell=True)) as api:
        yield api, writer, admin


def _allowed(reply: Reply, what: str) -> None:
    assert reply.status < 400 or reply.status == 409, (what, reply.status, reply.body)


async def _target(api: Api, admin: str, writer: str, pg_pool: asyncpg.Pool, *, shell: bool) -> Target:
    """An admin's shell job, or a write token's task job whose chain runs an admin's shell job;
    paused, with a queued run (trigger) and a cancelled one (to retry)."""
    label = "probe=shell" if shell else "probe=parent"
    fields = {"name": label, "labels": {"probe": label.split("=")[1]}, "status": "paused"}
    made = await api.call("POST", "/api/jobs", json={**(SHELL_JOB if shell else SEED_JOB), **fields},
                          token=admin if shell else writer)  # fmt: skip
    assert made.status == 201, made.body
    job = made.body["id"]
    if not shell:
        child = await api.call("POST", "/api/jobs", json={**SHELL_JOB, "name": "child", "parents": [job]}, token=admin)
        assert child.status == 201, child.body
    run = await api.call("POST", f"/api/jobs/{job}/trigger", token=admin)
    assert run.status == 202, run.body
    return Target(job, run.body["id"], label)


async def test_every_write_route_of_a_job_or_run_is_probed_or_cannot_start_one(settings: Settings) -> None:
    async with running_api(settings) as api:
        paths = (await api.call("GET", "/openapi.json")).body["paths"]
    listed = {(p.method, p.path) for p in PROBES} | {CREATE} | set(CANNOT_START_A_JOB)
    found = {(method.upper(), path) for path, ops in paths.items() for method in ops if method.upper() in _WRITES}
    assert found - listed == set(), f"probe these routes or say why they cannot make a job run: {found - listed}"
    assert listed - found == set(), f"listed but not in the API any more: {listed - found}"


async def test_a_write_token_cannot_let_a_shell_job_run_by_any_route(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    async with shell_api(settings, pg_pool) as (api, writer, admin):
        _forbidden(await api.call("POST", "/api/jobs", json=SHELL_JOB, token=writer), "admin")
        shell = await _target(api, admin, writer, pg_pool, shell=True)
        parent = await _target(api, admin, writer, pg_pool, shell=False)
        for target, is_shell in ((shell, True), (parent, False)):
            for probe in PROBES:
                path, body = probe.request(target)
                what = f"{probe.method} {path} {body} ({'shell' if is_shell else 'parent of shell'})"
                reply = await api.call(probe.method, path, json=body, token=writer)
                if is_shell or probe.starts_runs:
                    _forbidden(reply, "admin")
                    assert f"job {target.job}" in reply.body["detail"] or probe.path.startswith("/api/runs"), what
                else:
                    _allowed(reply, what)
        # Nothing a refused request did: both jobs still paused, no run queued but the admin's.
        rows = await pg_pool.fetch("SELECT id, status FROM jobs WHERE id = ANY($1)", [shell.job, parent.job])
        assert {r["status"] for r in rows} == {"paused"}, rows
        runs = await pg_pool.fetchval("SELECT count(*) FROM runs WHERE job_id = ANY($1)", [shell.job, parent.job])
        assert runs == 2, runs  # the admin's triggers only
        # An admin may do each of them (the cancelled run is the one retried).
        for target in (shell, parent):
            for probe in PROBES:
                path, body = probe.request(target)
                _allowed(await api.call(probe.method, path, json=body, token=admin), f"admin: {probe.method} {path}")
        created = await api.call("POST", "/api/jobs", json={**SHELL_JOB, "name": "admin's"}, token=admin)
        assert created.status == 201, created.body


async def test_a_write_token_cannot_resume_a_task_job_whose_chain_runs_a_shell_job(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    """The finding: resume, toggle and a bulk resume by selector of a paused parent answered 200."""
    async with shell_api(settings, pg_pool) as (api, writer, admin):
        parent = await _target(api, admin, writer, pg_pool, shell=False)
        for method, path, body in (
            ("POST", f"/api/jobs/{parent.job}/resume", None),
            ("PATCH", f"/api/jobs/{parent.job}/toggle", None),
            ("POST", "/api/jobs/bulk", {"selector": parent.label, "action": "resume"}),
        ):
            _forbidden(await api.call(method, path, json=body, token=writer), "admin")
        status = await pg_pool.fetchval("SELECT status FROM jobs WHERE id = $1", parent.job)
        assert status == "paused"
        # A write token still pauses and cancels on its own task job: nothing there lets a shell job run.
        assert (await api.call("POST", f"/api/runs/{parent.run}/cancel", token=writer)).status == 200


async def test_a_write_token_cannot_cancel_an_admins_shell_run(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    async with shell_api(settings, pg_pool) as (api, writer, admin):
        shell = await _target(api, admin, writer, pg_pool, shell=True)
        _forbidden(await api.call("POST", f"/api/runs/{shell.run}/cancel", token=writer), "admin")
        assert await pg_pool.fetchval("SELECT state FROM runs WHERE id = $1", shell.run) == "queued"
        assert (await api.call("POST", f"/api/runs/{shell.run}/cancel", token=admin)).status == 200
