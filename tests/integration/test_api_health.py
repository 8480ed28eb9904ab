"""/health (seed contract, and 503 naming the backend that is down), /metrics, /openapi.json, logs."""

from __future__ import annotations

import logging
import socket
import uuid
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web

from api.app import create_app
from api.service import ApiService
from cronos.errors import ConfigError
from cronos.settings import Settings
from cronos.store.db import migrate
from tests.integration.api_client import HEALTHY, SEED_JOB, running_api
from tests.services import Services, with_database
from tests.waiting import wait_for

ADMIN_TOKEN = "admin-" + "x" * 40

def _closed_port() -> int:
    """A local port nothing listens on: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _with(settings: Settings, **changes: Any) -> Settings:
    return Settings(**{**{f: getattr(settings, f) for f in settings.__struct_fields__}, **changes})


def _down(settings: Settings, *, db: bool = False, cache: bool = False) -> Settings:
    port = _closed_port()
    changes: dict[str, Any] = {}
    if db:
        changes["database_url"] = f"postgresql://cronos:s3cret-pw@127.0.0.1:{port}/cronos"
    if cache:
        changes["redis_url"] = f"redis://:s3cret-pw@127.0.0.1:{port}/0"
    return _with(settings, **changes)


async def test_health_ok(settings: Settings) -> None:
    async with running_api(settings) as api:
        reply = await api.call("GET", "/health")
    assert reply.status == 200 and reply.body == HEALTHY


@pytest.mark.parametrize(
    ("db", "cache", "database", "cache_text"),
    [
        (True, False, "PostgreSQL Disconnected", "Redis Connected"),
        (False, True, "PostgreSQL Connected", "Redis Disconnected"),
        (True, True, "PostgreSQL Disconnected", "Redis Disconnected"),
    ],
)
async def test_health_503_names_the_backend_down(
    settings: Settings, db: bool, cache: bool, database: str, cache_text: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # CRONOS_ADMIN_TOKEN authenticates without the database; with no token at all, whether
    # protected mode applies needs the database, so then even the cluster view is a 503.
    down = _with(_down(settings, db=db, cache=cache), admin_token=ADMIN_TOKEN)
    async with running_api(down, token=ADMIN_TOKEN) as api:  # starts although a backend is down
        reply = await api.call("GET", "/health", token="")
        assert reply.status == 503
        assert reply.body == {**HEALTHY, "status": "degraded", "database": database, "cache": cache_text}
        jobs = await api.call("GET", "/api/jobs")
        if db:  # a request that needs PostgreSQL gets a quick 503 problem, not a hang
            assert jobs.status == 503 and jobs.body["type"] == "urn:cronos:problem:backend-unavailable"
            assert "s3cret" not in jobs.body["detail"]
        else:
            assert jobs.status == 200
        cluster = await api.call("GET", "/api/cluster")
        assert cluster.status == 200
        assert cluster.body["cache"] == ("disconnected" if cache else "connected")
        assert cluster.body["database"] == ("disconnected" if db else "connected")
        if cache:
            assert cluster.body["stream"] is None and cluster.body["leader"]["node_id"] is None
        metrics = await api.call("GET", "/metrics")
        assert metrics.status == 200  # a scrape never fails because a backend is down
    if db:
        async with running_api(_down(settings, db=True, cache=cache)) as api:
            refused = await api.call("GET", "/api/cluster")  # no token: protected mode cannot be decided
            assert refused.status == 503 and refused.body["type"] == "urn:cronos:problem:backend-unavailable"
            assert (await api.call("GET", "/health")).status == 503  # still the seed body, no auth
    assert "s3cret" not in caplog.text  # secrets never logged


async def test_health_recovers_when_the_database_appears(settings: Settings, services: Services) -> None:
    name = f"cronos_late_{uuid.uuid4().hex[:10]}"
    late = _with(settings, database_url=with_database(services.pg_admin_dsn, name))
    try:
        async with running_api(late) as api:
            reply = await api.call("GET", "/health")
            assert reply.status == 503 and reply.body["database"] == "PostgreSQL Disconnected"
            jobs = await api.call("GET", "/api/jobs")
            assert jobs.status == 503 and jobs.body["title"] == "Backend unavailable"
            await migrate(late.database_url)  # the database shows up, as `cronos migrate` would make it

            async def healthy() -> bool:
                return (await api.call("GET", "/health")).status == 200

            await wait_for(healthy, timeout=10, interval=0.2, what="the API to reconnect")
            assert (await api.call("GET", "/api/jobs")).status == 200
    finally:
        admin = await asyncpg.connect(services.pg_admin_dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def test_metrics_exposes_the_registry_and_job_counts(settings: Settings) -> None:
    async with running_api(settings) as api:
        await api.create()
        await api.create(name="b", status="paused")
        await api.create(name="c", status="paused")
        reply = await api.call("GET", "/metrics")
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/plain")
    lines = reply.body.splitlines()
    assert 'cronos_jobs{status="active"} 1.0' in lines
    assert 'cronos_jobs{status="paused"} 2.0' in lines
    assert any(line.startswith("# TYPE cronos_runs_total counter") for line in lines)


async def test_openapi_describes_every_route_body_and_error(settings: Settings) -> None:
    app = create_app(settings)
    registered = {
        (r.method, r.resource.canonical.replace("{id:[0-9]+}", "{id}"))
        for r in app.router.routes()
        if r.method != "HEAD" and r.resource is not None
    }
    async with running_api(settings) as api:
        reply = await api.call("GET", "/openapi.json")
    assert reply.status == 200
    doc = reply.body
    assert doc["openapi"].startswith("3.")
    described = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert described == registered
    assert len(described) >= 15
    create = doc["paths"]["/api/jobs"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/JobCreate")
    assert {"201", "400", "409", "413", "422"} <= set(create["responses"])
    assert "application/problem+json" in create["responses"]["422"]["content"]
    schemas = doc["components"]["schemas"]
    assert {"JobCreate", "JobPatch", "JobOut", "RunOut", "Problem", "Health", "ClusterOut"} <= set(schemas)
    assert schemas["JobCreate"]["required"] == ["name", "payload"]  # and a schedule: one of these three
    shapes = [v["required"] for v in schemas["JobCreate"]["allOf"][0]["oneOf"]]
    assert shapes == [["cron_expression"], ["run_at"], ["every"]], shapes
    assert schemas["JobCreate"]["properties"]["name"]["maxLength"] == 200
    assert doc["paths"]["/health"]["get"]["responses"]["503"]["content"]


async def test_access_and_error_logs_are_structured(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_api(settings) as api:
        await api.call("POST", "/api/jobs", json=SEED_JOB)
        await api.call("GET", "/api/jobs/12345")
    access = [r for r in caplog.records if getattr(r, "event", None) == "http.request"]
    assert [(r.method, r.path, r.status) for r in access] == [  # type: ignore[attr-defined]
        ("POST", "/api/jobs", 201),
        ("GET", "/api/jobs/12345", 404),
    ]
    assert all(isinstance(r.duration_ms, float) for r in access)  # type: ignore[attr-defined]
    created = [r for r in caplog.records if getattr(r, "event", None) == "job.created"]
    assert len(created) == 1 and isinstance(created[0].job_id, int)  # type: ignore[attr-defined]


async def test_a_taken_port_is_a_clear_config_error(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        busy = _with(settings, port=port)
        with pytest.raises(ConfigError, match=rf"^PORT: cannot listen on 127\.0\.0\.1:{port}"):
            async with ApiService(busy, host="127.0.0.1"):
                pass


async def test_a_bug_is_a_500_problem_logged_with_its_traceback(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def boom(request: web.Request) -> web.Response:
        raise RuntimeError("secret internals")

    service = ApiService(settings, host="127.0.0.1")
    service.app.router.add_get("/boom", boom)
    async with (
        service,
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{service.port}/boom") as resp,
    ):
        assert resp.status == 500
        assert resp.headers["Content-Type"].startswith("application/problem+json")
        body = await resp.json(content_type=None)
    assert body["title"] == "Internal server error" and "secret internals" not in body["detail"]
    errors = [r for r in caplog.records if getattr(r, "event", None) == "api.error"]
    assert len(errors) == 1 and errors[0].exc_info is not None and errors[0].path == "/boom"  # type: ignore[attr-defined]
