"""Console sessions of signed-in people: the store, the cookie on every route, CSRF, sign-out.

The sign-in itself (a real provider, a real browser) is tests/browser/test_sign_in.py; here the
session is opened by the store, as the callback opens it, and the API is real.
"""

from __future__ import annotations

import secrets
from typing import Any

import asyncpg
import pytest

from api.console_session import csrf_token
from cronos.settings import Settings
from cronos.store.sessions import SessionStore
from cronos.store.tokens import TokenStore
from tests.integration.api_client import SEED_JOB, running_api

CLIENT_SECRET = secrets.token_hex(32)


def _signed_in(settings: Settings, **changes: Any) -> Settings:
    on = {
        "oidc_issuer": "http://127.0.0.1:9/unreachable",  # sessions need no provider; sign-in would get a 502
        "oidc_client_id": "cronos-console",
        "oidc_client_secret": CLIENT_SECRET,
        "oidc_redirect_base": "http://127.0.0.1:1",
        "oidc_provider_name": "Example ID",
        "auth": "required",
    }
    return Settings(**{**{f: getattr(settings, f) for f in settings.__struct_fields__}, **on, **changes})


async def _session(pool: asyncpg.Pool, *scopes: str, lifetime_s: float = 3600, who: str = "ana") -> str:
    return await SessionStore(pool).create(
        actor=f"oidc:{who}@example.com", subject=who, scopes=scopes, groups=["g"], lifetime_s=lifetime_s
    )


def _cookie(session_id: str, *, csrf: bool = False) -> dict[str, str]:
    headers = {"Cookie": f"cronos_session={session_id}"}
    return headers | ({"X-CSRF-Token": csrf_token(session_id)} if csrf else {})


async def test_the_store_keeps_only_a_hash_and_a_sign_in_is_taken_once(pg_pool: asyncpg.Pool) -> None:
    store = SessionStore(pg_pool)
    session_id = await _session(pg_pool, "read")
    rows = await pg_pool.fetch("SELECT * FROM console_sessions")
    assert len(rows) == 1 and all(session_id not in str(value) for value in dict(rows[0]).values())
    assert (found := await store.lookup(session_id)) is not None and found.scopes == ["read"]
    assert await store.lookup(session_id + "x") is None
    assert await store.end(session_id) == "oidc:ana@example.com"
    assert await store.lookup(session_id) is None and await store.end(session_id) is None

    await store.begin_login("state-1", "nonce-1", "verifier-1")
    assert "state-1" not in str(dict((await pg_pool.fetch("SELECT state_hash FROM oidc_logins"))[0]))
    taken = await store.take_login("state-1")
    assert taken is not None and (taken.nonce, taken.code_verifier) == ("nonce-1", "verifier-1")
    assert await store.take_login("state-1") is None  # replayed
    await store.begin_login("state-2", "n", "v")
    await pg_pool.execute("UPDATE oidc_logins SET expires_at = now() - interval '1 second'")
    assert await store.take_login("state-2") is None  # expired


async def test_an_expired_session_signs_nobody_in(pg_pool: asyncpg.Pool) -> None:
    session_id = await _session(pg_pool, "admin", lifetime_s=-1)
    assert await SessionStore(pg_pool).lookup(session_id) is None


async def test_a_session_reads_writes_with_its_csrf_header_and_signs_out(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(_signed_in(settings)) as api:
        writer = await _session(pg_pool, "write")
        assert (await api.call("GET", "/api/jobs", headers=_cookie(writer))).status == 200

        forged = await api.call("POST", "/api/jobs", json=SEED_JOB, headers=_cookie(writer))
        assert forged.status == 403 and forged.body["type"] == "urn:cronos:problem:csrf", forged.body
        wrong = await api.call("POST", "/api/jobs", json=SEED_JOB, headers=_cookie(writer) | {"X-CSRF-Token": "x"})
        assert wrong.status == 403 and wrong.body["type"] == "urn:cronos:problem:csrf"
        assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 0

        created = await api.call("POST", "/api/jobs", json=SEED_JOB, headers=_cookie(writer, csrf=True))
        assert created.status == 201, created.body
        history = await api.call("GET", f"/api/jobs/{created.body['id']}/history", headers=_cookie(writer))
        assert history.body["items"][0]["actor"] == "oidc:ana@example.com"

        state = await api.call("GET", "/auth/session", headers=_cookie(writer))
        assert state.body["provider"] == "Example ID" and state.body["actor"] == "oidc:ana@example.com"
        assert state.body["scopes"] == ["write"] and state.body["csrf"] == csrf_token(writer)
        assert (await api.call("GET", "/auth/session")).body == {
            "provider": "Example ID", "actor": None, "scopes": [], "expires_at": None, "csrf": None
        }  # fmt: skip

        assert (await api.call("POST", "/auth/logout", headers=_cookie(writer))).status == 403  # no CSRF header
        out = await api.call("POST", "/auth/logout", headers=_cookie(writer, csrf=True))
        assert out.status == 204 and "cronos_session=" in out.headers["Set-Cookie"]
        ended = await api.call("GET", "/api/jobs", headers=_cookie(writer))
        assert ended.status == 401 and "sign in again" in ended.body["detail"], ended.body


async def test_a_read_session_is_refused_a_write_and_a_token_decides_alone(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(_signed_in(settings)) as api:
        reader = await _session(pg_pool, "read", who="bo")
        refused = await api.call("POST", "/api/jobs", json=SEED_JOB, headers=_cookie(reader, csrf=True))
        assert refused.status == 403 and refused.body["type"] == "urn:cronos:problem:forbidden", refused.body
        assert "`oidc:bo@example.com` holds read" in refused.body["detail"]
        assert (await api.call("GET", "/api/tokens", headers=_cookie(reader))).status == 403

        # A bearer token with the cookie beside it: the token decides, no CSRF header needed.
        _info, token = await TokenStore(pg_pool).create("deploy", ["write"], None, actor="cli")
        made = await api.call("POST", "/api/jobs", json=SEED_JOB, token=token, headers=_cookie(reader))
        assert made.status == 201, made.body
        revoked_cookie = await api.call("GET", "/api/jobs", headers=_cookie("not-a-session"))
        assert revoked_cookie.status == 401


async def test_sign_in_off_ignores_the_cookie_and_hides_the_routes(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    admin = await _session(pg_pool, "admin")
    async with running_api(settings) as api:  # protected mode: loopback acts as admin, the cookie changes nothing
        assert (await api.call("GET", "/auth/session")).body["provider"] is None
        assert (await api.call("GET", "/auth/login")).status == 404
        made = await api.call("POST", "/api/jobs", json=SEED_JOB, headers=_cookie(admin))
        assert made.status == 201
        history = await api.call("GET", f"/api/jobs/{made.body['id']}/history")
        assert history.body["items"][0]["actor"] == "local"


async def test_an_unreachable_provider_is_a_502_naming_it(settings: Settings) -> None:
    async with running_api(_signed_in(settings)) as api:
        reply = await api.call("GET", "/auth/login")
        assert reply.status == 502 and reply.body["type"] == "urn:cronos:problem:identity-provider-unavailable"
        assert CLIENT_SECRET not in str(reply.body)
        forged = await api.call("GET", "/auth/callback?state=forged&code=x", headers={"Cookie": "cronos_login=other"})
        assert forged.status == 400 and "state" in forged.body["detail"], forged.body


@pytest.mark.parametrize("base", ["https://cronos.example.com", "http://127.0.0.1:1"])
async def test_the_login_cookie_is_httponly_lax_and_secure_on_https(settings: Settings, base: str) -> None:
    from aiohttp import web

    from api.console_session import set_cookie

    response = web.Response()
    set_cookie(response, _signed_in(settings, oidc_redirect_base=base), "cronos_session", "v", path="/", max_age=60)
    header = response.cookies["cronos_session"].OutputString().lower()
    assert "httponly" in header and "samesite=lax" in header and "path=/" in header
    assert ("secure" in header.split("; ")) == base.startswith("https://")
