"""Tokens, scopes, protected mode, cross-origin refusal and the Server header, against a real API."""

from __future__ import annotations

import asyncio
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from api.auth import listen_host
from cronos.errors import ConfigError, Conflict
from cronos.settings import Settings
from cronos.store.tokens import TokenStore
from tests.integration.api_client import HEALTHY, SEED_JOB, Api, Reply, running_api

HOW_TO = "cronos token create --name NAME --scope admin"
ADMIN_SECRET = "deploy-admin-" + "a" * 40
METRICS_SECRET = "deploy-metrics-" + "m" * 40
SHELL_JOB = {**SEED_JOB, "name": "sh", "kind": "shell", "payload": {"argv": ["true"]}}


def _with(settings: Settings, **changes: Any) -> Settings:
    return Settings(**{**{f: getattr(settings, f) for f in settings.__struct_fields__}, **changes})


async def _token(pool: asyncpg.Pool, name: str, *scopes: str, expires_at: datetime | None = None) -> str:
    _info, text = await TokenStore(pool).create(name, scopes, expires_at, actor="cli")
    return text


def _unauthorized(reply: Reply, why: str) -> None:
    assert reply.status == 401, reply.body
    assert reply.body["type"] == "urn:cronos:problem:unauthorized" and why in reply.body["detail"], reply.body
    assert reply.headers["WWW-Authenticate"].startswith('Bearer realm="cronos"')
    assert reply.headers["Content-Type"].startswith("application/problem+json")


def _forbidden(reply: Reply, scope: str) -> None:
    assert reply.status == 403, reply.body
    assert reply.body["type"] == "urn:cronos:problem:forbidden", reply.body
    assert f"needs scope `{scope}`" in reply.body["detail"], reply.body


def _non_loopback_address() -> str | None:
    """This machine's address on a real interface (the one a default route would use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent, only a route is chosen
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


async def test_protected_mode_serves_loopback_clients_with_a_loopback_host(settings: Settings) -> None:
    async with running_api(settings) as api:
        port = api.service.port
        assert (await api.call("POST", "/api/jobs", json=SEED_JOB)).status == 201  # the seed's curl, no token
        for host in (f"localhost:{port}", "localhost", f"127.0.0.1:{port}", "127.5.6.7", f"[::1]:{port}"):
            reply = await api.call("GET", "/api/jobs", headers={"Host": host})
            assert reply.status == 200, (host, reply.body)
        for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example", "10.0.0.1"):
            refused = await api.call("GET", "/api/jobs", headers={"Host": host})  # DNS rebinding
            assert refused.status == 403, (host, refused.body)
            assert refused.body["type"] == "urn:cronos:problem:protected-mode"
            assert HOW_TO in refused.body["detail"] and "Authorization: Bearer <token>" in refused.body["detail"]
        history = await api.call("GET", "/api/jobs/1/history")
        assert history.body["items"][0]["actor"] == "local"


async def test_protected_mode_refuses_to_listen_beyond_loopback(settings: Settings) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.7", "cronos.internal"):
        with pytest.raises(ConfigError, match=r"set CRONOS_AUTH=required .* or CRONOS_API_HOST=127\.0\.0\.1"):
            async with running_api(settings, host=host):
                pass
    for host in ("127.0.0.1", "::1", "localhost"):
        async with running_api(settings, host=host) as api:
            assert (await api.call("GET", "/api/jobs")).status == 200
    assert listen_host(settings) == "127.0.0.1"  # the default where protected mode is possible
    assert listen_host(_with(settings, auth="required")) == "0.0.0.0"  # containers and pods


async def test_a_network_client_needs_a_token_when_auth_is_required(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to call the API from")
    async with running_api(_with(settings, auth="required"), host="0.0.0.0") as local:
        remote = Api(local.service, local.session, f"http://{address}:{local.service.port}")
        _unauthorized(await remote.call("GET", "/api/jobs"), "missing bearer token")
        _unauthorized(await local.call("GET", "/api/jobs"), "missing bearer token")  # loopback too
        token = await _token(pg_pool, "ops", "read")
        assert (await remote.call("GET", "/api/jobs", token=token)).status == 200
        assert (await local.call("GET", "/api/jobs", token=token)).status == 200


async def test_protected_mode_never_returns_when_the_last_token_expires_or_is_revoked(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(settings) as api:
        assert (await api.call("GET", "/api/jobs")).status == 200  # protected mode: loopback is admin
        created = await api.call("POST", "/api/tokens", json={"name": "ci", "scopes": ["admin"]})
        assert created.status == 201, created.body
        _unauthorized(await api.call("GET", "/api/jobs"), "missing bearer token")
        assert (await api.call("DELETE", "/api/tokens/ci", token=created.body["token"])).status == 204
        _unauthorized(await api.call("GET", "/api/jobs"), "missing bearer token")  # revoked: still closed
        await _token(pg_pool, "brief", "read", expires_at=datetime.now(UTC) - timedelta(seconds=1))
        await _token(pg_pool, "later", "read", expires_at=datetime.now(UTC) + timedelta(hours=1))
        await pg_pool.execute("UPDATE api_tokens SET expires_at = now() - interval '1 second'")  # all expire
        _unauthorized(await api.call("GET", "/api/jobs"), "missing bearer token")  # expired: still closed
        assert (await api.call("POST", "/api/tokens", json={"name": "x", "scopes": ["admin"]})).status == 401

        # Only the operator reopens it (audited), and never while a token can be used.
        live = await _token(pg_pool, "live", "read")
        with pytest.raises(Conflict, match="usable tokens exist"):
            await TokenStore(pg_pool).reopen_local(actor="cli")
        await TokenStore(pg_pool).revoke("live", actor="cli")
        assert await TokenStore(pg_pool).reopen_local(actor="cli") is True
        assert await TokenStore(pg_pool).reopen_local(actor="cli") is False  # already open
        assert (await api.call("GET", "/api/jobs")).status == 200
        _unauthorized(await api.call("GET", "/api/jobs", token=live), "token revoked")
        history = await api.call("GET", "/api/tokens/history")
        assert [(e["action"], e["actor"]) for e in history.body["items"][:2]] == [
            ("protected-mode-reopened", "cli"),
            ("revoked", "cli"),
        ]


async def test_missing_bad_expired_and_revoked_tokens_are_401(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    good = await _token(pg_pool, "good", "read")
    expired = await _token(pg_pool, "old", "read", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    revoked = await _token(pg_pool, "gone", "read")
    await TokenStore(pg_pool).revoke("gone", actor="cli")
    async with running_api(settings) as api:
        assert (await api.call("GET", "/api/jobs", token=good)).status == 200
        _unauthorized(await api.call("GET", "/api/jobs"), "missing bearer token")
        _unauthorized(await api.call("GET", "/api/jobs", token=good + "x"), "unknown token")
        _unauthorized(await api.call("GET", "/api/jobs", token=expired), "token expired")
        _unauthorized(await api.call("GET", "/api/jobs", token=revoked), "token revoked")
        basic = await api.call("GET", "/api/jobs", headers={"Authorization": "Basic dXNlcjpwdw=="})
        _unauthorized(basic, "malformed Authorization header")
        _unauthorized(await api.call("GET", f"/api/jobs?access_token={good}"), "not accepted in the query string")
        # last_used_at is set on use (and moves at most once a minute, not on every request)
        used = await pg_pool.fetchval("SELECT last_used_at FROM api_tokens WHERE name = 'good'")
        assert used is not None
        await api.call("GET", "/api/jobs", token=good)
        assert await pg_pool.fetchval("SELECT last_used_at FROM api_tokens WHERE name = 'good'") == used


async def test_each_scope_boundary_is_a_403_naming_the_scope(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    reader = await _token(pg_pool, "reader", "read")
    writer = await _token(pg_pool, "writer", "write")
    admin = await _token(pg_pool, "boss", "admin")
    async with running_api(_with(settings, allow_shell=True)) as api:
        # read: every GET, no write
        assert (await api.call("GET", "/api/jobs", token=reader)).status == 200
        assert (await api.call("GET", "/api/cluster", token=reader)).status == 200
        _forbidden(await api.call("POST", "/api/jobs", json=SEED_JOB, token=reader), "write")
        # write: task/http jobs, not shell jobs, not tokens
        task = (await api.call("POST", "/api/jobs", json=SEED_JOB, token=writer)).body
        assert (await api.call("POST", f"/api/jobs/{task['id']}/pause", token=writer)).status == 200
        _forbidden(await api.call("POST", "/api/jobs", json=SHELL_JOB, token=writer), "admin")
        _forbidden(await api.call("PATCH", f"/api/jobs/{task['id']}", json={**SHELL_JOB}, token=writer), "admin")
        _forbidden(await api.call("GET", "/api/tokens", token=writer), "admin")
        new = {"name": "x", "scopes": ["read"]}
        _forbidden(await api.call("POST", "/api/tokens", json=new, token=writer), "admin")
        # admin: shell jobs and tokens; a write token cannot touch the shell job an admin made
        shell = await api.call("POST", "/api/jobs", json=SHELL_JOB, token=admin)
        assert shell.status == 201, shell.body
        sid = shell.body["id"]
        for method, path in (
            ("PATCH", f"/api/jobs/{sid}/toggle"),
            ("POST", f"/api/jobs/{sid}/pause"),
            ("POST", f"/api/jobs/{sid}/trigger"),
            ("POST", f"/api/jobs/{sid}/rotate-secret"),
            ("DELETE", f"/api/jobs/{sid}"),
        ):
            _forbidden(await api.call(method, path, token=writer), "admin")
        _forbidden(await api.call("PATCH", f"/api/jobs/{sid}", json={"kind": "task"}, token=writer), "admin")
        assert (await api.call("GET", f"/api/jobs/{sid}", token=reader)).body["status"] == "active"  # untouched
        assert (await api.call("POST", "/api/tokens", json=new, token=admin)).status == 201
        assert (await api.call("DELETE", f"/api/jobs/{sid}", token=admin)).status == 204


async def test_a_write_token_cannot_run_a_shell_job_through_its_chain_or_reschedule_its_parent(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    writer = await _token(pg_pool, "writer", "write")
    admin = await _token(pg_pool, "boss", "admin")
    async with running_api(_with(settings, allow_shell=True)) as api:
        top = (await api.call("POST", "/api/jobs", json={**SEED_JOB, "name": "top"}, token=writer)).body["id"]
        mid = await api.call("POST", "/api/jobs", json={**SEED_JOB, "name": "mid", "parents": [top]}, token=writer)
        assert (await api.call("POST", f"/api/jobs/{top}/trigger", token=writer)).status == 202  # no shell below
        # An admin hangs a shell job under the task chain: a grandchild of `top`.
        shell = await api.call("POST", "/api/jobs", json={**SHELL_JOB, "parents": [mid.body["id"]]}, token=admin)
        assert shell.status == 201, shell.body
        for job in (top, mid.body["id"]):
            refused = await api.call("POST", f"/api/jobs/{job}/trigger", token=writer)
            _forbidden(refused, "admin")
            assert f"shell job {shell.body['id']}" in refused.body["detail"], refused.body
        # Nor make it run more often: a change of a job up the chain needs admin too.
        every_second = await api.call(
            "PATCH", f"/api/jobs/{top}", json={"cron_expression": "* * * * * *"}, token=writer
        )
        _forbidden(every_second, "admin")
        assert f"shell job {shell.body['id']}" in every_second.body["detail"], every_second.body
        assert (await api.call("GET", f"/api/jobs/{top}", token=writer)).body["cron_expression"] == SEED_JOB[
            "cron_expression"
        ]
        assert (await api.call("POST", f"/api/jobs/{top}/trigger", token=admin)).status == 202
    triggers = await pg_pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", top)
    assert triggers == 2  # the writer's first trigger and the admin's, none refused ran


async def test_shell_jobs_stay_refused_when_the_cluster_does_not_allow_them(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    admin = await _token(pg_pool, "boss", "admin")
    async with running_api(settings) as api:  # allow_shell off
        reply = await api.call("POST", "/api/jobs", json=SHELL_JOB, token=admin)
    assert reply.status == 422 and reply.body["field"] == "$.kind", reply.body


async def test_a_revoked_token_fails_at_once_on_another_replica(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    admin = await _token(pg_pool, "boss", "admin")
    async with running_api(settings, token=admin) as one, running_api(settings, token=admin) as two:
        created = await one.call("POST", "/api/tokens", json={"name": "ci", "scopes": ["write"]})
        assert created.status == 201, created.body
        ci = created.body["token"]
        assert (await two.call("GET", "/api/jobs", token=ci)).status == 200
        assert (await one.call("DELETE", "/api/tokens/ci")).status == 204
        _unauthorized(await two.call("GET", "/api/jobs", token=ci), "token revoked")
        _unauthorized(await one.call("GET", "/api/jobs", token=ci), "token revoked")


async def test_tokens_api_creates_lists_and_revokes(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    admin = await _token(pg_pool, "boss", "admin")
    async with running_api(settings, token=admin) as api:
        created = await api.call("POST", "/api/tokens", json={"name": "ci", "scopes": ["write"], "expires_in_s": 3600})
        assert created.status == 201, created.body
        text = created.body["token"]
        assert text.startswith("cronos_") and len(text) >= len("cronos_") + 43  # 256 bits
        assert created.body["scopes"] == ["write"] and created.body["expires_at"] is not None
        stored = await pg_pool.fetchval("SELECT token_hash FROM api_tokens WHERE name = 'ci'")
        assert text.encode() not in bytes(stored) and len(stored) == 32  # only the SHA-256

        listed = await api.call("GET", "/api/tokens")
        assert [t["name"] for t in listed.body["items"]] == ["boss", "ci"]
        assert text not in str(listed.body) and "token" not in listed.body["items"][1]

        dup = await api.call("POST", "/api/tokens", json={"name": "ci", "scopes": ["read"]})
        assert dup.status == 409
        bad = await api.call("POST", "/api/tokens", json={"name": "ci2", "scopes": ["root"]})
        assert bad.status == 422 and bad.body["field"].startswith("$.scopes")
        reserved = await api.call("POST", "/api/tokens", json={"name": "local", "scopes": ["read"]})
        assert reserved.status == 422 and reserved.body["field"] == "$.name"

        assert (await api.call("DELETE", "/api/tokens/ci")).status == 204
        assert (await api.call("DELETE", "/api/tokens/ci")).status == 404
        history = await api.call("GET", "/api/tokens/history")
        entries = [(e["action"], e["token_name"], e["actor"]) for e in history.body["items"]]
        assert entries[:2] == [("revoked", "ci", "boss"), ("created", "ci", "boss")]
        assert text not in str(history.body)


async def test_auth_required_needs_a_token_even_on_loopback(settings: Settings) -> None:
    required = _with(settings, auth="required", admin_token=ADMIN_SECRET)
    async with running_api(required) as api:
        _unauthorized(await api.call("GET", "/api/jobs"), "missing bearer token")
        _unauthorized(await api.call("POST", "/api/jobs", json=SEED_JOB), "missing bearer token")
        created = await api.call("POST", "/api/jobs", json=SEED_JOB, token=ADMIN_SECRET)
        assert created.status == 201
        history = await api.call("GET", f"/api/jobs/{created.body['id']}/history", token=ADMIN_SECRET)
        assert history.body["items"][0]["actor"] == "admin-token"
    async with running_api(_with(settings, auth="required")) as api:  # no token anywhere: still refused
        _unauthorized(await api.call("GET", "/api/jobs"), "missing bearer token")


@pytest.mark.parametrize("mode", ["auto-no-token", "auto-token-exists", "required"])
async def test_health_is_open_in_every_mode(settings: Settings, pg_pool: asyncpg.Pool, mode: str) -> None:
    if mode == "auto-token-exists":
        await _token(pg_pool, "any", "read")
    chosen = _with(settings, auth="required") if mode == "required" else settings
    async with running_api(chosen) as api:
        for headers in ({}, {"Host": "evil.example"}, {"Authorization": "Bearer nonsense"}):
            reply = await api.call("GET", "/health", headers=headers)
            assert (reply.status, reply.body) == (200, HEALTHY), (headers, reply.body)
        assert (await api.call("GET", "/openapi.json", headers={"Host": "evil.example"})).status == 200


async def test_the_metrics_token_opens_metrics_only(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    reader = await _token(pg_pool, "reader", "read")
    async with running_api(_with(settings, auth="required", metrics_token=METRICS_SECRET)) as api:
        scrape = await api.call("GET", "/metrics", token=METRICS_SECRET)
        assert scrape.status == 200 and "cronos_jobs" in scrape.body
        assert (await api.call("GET", "/metrics", token=reader)).status == 200
        _unauthorized(await api.call("GET", "/metrics"), "missing bearer token")
        _forbidden(await api.call("GET", "/api/jobs", token=METRICS_SECRET), "read")
        _forbidden(await api.call("POST", "/api/jobs", json=SEED_JOB, token=METRICS_SECRET), "write")


async def test_cross_origin_writes_are_refused(settings: Settings) -> None:
    async with running_api(settings) as api:
        own = f"http://127.0.0.1:{api.service.port}"
        for origin in ("http://evil.example", "null", f"http://localhost:{api.service.port}"):
            refused = await api.call("POST", "/api/jobs", json=SEED_JOB, headers={"Origin": origin})
            assert refused.status == 403 and refused.body["type"] == "urn:cronos:problem:cross-origin", origin
        assert (await api.call("GET", "/api/jobs")).body["items"] == []  # nothing was created
        assert (await api.call("GET", "/api/jobs", headers={"Origin": "http://evil.example"})).status == 200
        assert (await api.call("POST", "/api/jobs", json=SEED_JOB, headers={"Origin": own})).status == 201


async def test_server_header_names_no_version(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    async with running_api(settings) as api:
        replies = [
            await api.call("GET", "/health"),
            await api.call("GET", "/api/jobs"),
            await api.call("GET", "/nowhere"),
            await api.call("GET", "/api/jobs", headers={"Host": "evil.example"}),
        ]
        await _token(pg_pool, "any", "read")
        replies.append(await api.call("GET", "/api/jobs"))  # a 401
        # A request aiohttp refuses before any route matches (malformed header line): still no version.
        reader, writer = await asyncio.open_connection("127.0.0.1", api.service.port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n")
        raw = (await reader.read(4096)).decode(errors="replace")
        writer.close()
    assert [r.status for r in replies] == [200, 200, 404, 403, 401]
    assert {r.headers["Server"] for r in replies} == {"Cronos"}
    assert raw.startswith("HTTP/1.") and " 400 " in raw.splitlines()[0]
    assert "\r\nServer: Cronos\r\n" in raw and "aiohttp" not in raw and "Python" not in raw


async def test_a_database_down_while_authenticating_is_a_503(settings: Settings) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = _with(settings, database_url=f"postgresql://postgres@127.0.0.1:{port}/nothing")
    async with running_api(down) as api:
        for token in (None, "cronos_" + "x" * 43):
            reply = await api.call("GET", "/api/jobs", token=token)
            assert reply.status == 503 and reply.body["type"] == "urn:cronos:problem:backend-unavailable"
