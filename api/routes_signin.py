"""Console sign-in with OpenID Connect (docs/sign-in.md): /auth/login, /auth/callback,
/auth/logout and /auth/session.

The authorization code flow with PKCE: /auth/login draws a state, a nonce and a PKCE verifier,
keeps them server-side (cronos.store.sessions), binds the state to this browser (a cookie only
/auth/ sees) and sends the browser to the provider. /auth/callback takes that sign-in once (a
forged, replayed or expired state is refused), exchanges the code, verifies the ID token
(api.oidc), grants the scopes the person's groups map to (cronos.signin_grants) and opens a
session (api.console_session's cookie). Every route is public: each checks what it needs itself,
and the auth middleware checks the CSRF header of a POST carrying the session cookie.
"""

from __future__ import annotations

import hmac
import logging

from aiohttp import web

from api.auth import Denied
from api.bodies import respond
from api.console_session import (
    LOGIN_COOKIE,
    LOGIN_PATH,
    SESSION_COOKIE,
    clear_cookie,
    csrf_token,
    session_cookie,
    set_cookie,
)
from api.oidc import OidcClient, SignInFailed, TokenRefused, provider_name
from api.routing import DB_ERRORS, Route
from api.schemas_tokens import SignInState
from api.state import BACKENDS, OIDC
from cronos.scopes import SCOPES
from cronos.signin_grants import actor_of, claimed_groups, grants_for
from cronos.store.sessions import LOGIN_TTL_S, SessionStore, new_secret

log = logging.getLogger("cronos.api.signin")

_NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _client(request: web.Request) -> OidcClient:
    client = request.app.get(OIDC)
    if client is None:
        raise web.HTTPNotFound()  # sign-in is off: CRONOS_OIDC_ISSUER is not set
    return client


def _refused(detail: str) -> Denied:
    return Denied(400, "sign-in-refused", f"{detail}; start again from the console")


def _redirect(location: str) -> web.Response:
    return web.Response(status=302, headers={"Location": location, **_NO_STORE})


async def sign_in(request: web.Request) -> web.Response:
    client = _client(request)
    state, nonce, verifier = new_secret(), new_secret(), new_secret()
    try:
        url = await client.authorization_url(state, nonce, verifier)
    except SignInFailed as exc:
        raise Denied(502, "identity-provider-unavailable", str(exc)) from exc
    await SessionStore(await request.app[BACKENDS].pool()).begin_login(state, nonce, verifier)
    response = _redirect(url)
    set_cookie(response, client.settings, LOGIN_COOKIE, state, path=LOGIN_PATH, max_age=LOGIN_TTL_S)
    return response


async def callback(request: web.Request) -> web.Response:
    client = _client(request)
    settings = client.settings
    state = request.query.get("state", "")
    if not state or not hmac.compare_digest(state.encode(), request.cookies.get(LOGIN_COOKIE, "").encode()):
        raise _refused("this sign-in's state is not the one this browser began")
    store = SessionStore(await request.app[BACKENDS].pool())
    pending = await store.take_login(state)
    if pending is None:
        raise _refused("this sign-in is unknown, already used or expired")
    if "error" in request.query:
        raise _refused(f"the identity provider refused the sign-in ({request.query['error'][:100]})")
    code = request.query.get("code")
    if not code:
        raise _refused("the identity provider sent no code")
    try:
        answer = await client.exchange(code, pending.code_verifier)
        claims = await client.verify(answer["id_token"], nonce=pending.nonce, access_token=answer.get("access_token"))
    except TokenRefused as exc:
        raise _refused(str(exc)) from exc
    except SignInFailed as exc:
        raise Denied(502, "identity-provider-unavailable", str(exc)) from exc
    actor, groups = actor_of(claims), claimed_groups(claims, settings.oidc_groups_claim)
    scopes = grants_for(groups, settings.oidc_groups)
    if not scopes:
        raise Denied(403, "forbidden", f"`{actor}` is in no group that CRONOS_OIDC_GROUPS grants a scope")
    session_id = await store.create(
        actor=actor,
        subject=str(claims["sub"]),
        scopes=sorted(scopes, key=SCOPES.index),
        groups=groups,
        lifetime_s=settings.oidc_session_s,
    )
    log.info("signed in", extra={"event": "auth.signed_in", "actor": actor, "scopes": sorted(scopes)})
    response = _redirect(settings.oidc_redirect_base + "/")
    set_cookie(response, settings, SESSION_COOKIE, session_id, path="/", max_age=settings.oidc_session_s)
    clear_cookie(response, LOGIN_COOKIE, path=LOGIN_PATH)
    return response


async def sign_out(request: web.Request) -> web.Response:
    # The middleware has checked the CSRF header when the cookie came: nobody signs you out from elsewhere.
    settings = request.app[BACKENDS].settings
    session_id = session_cookie(request, settings)
    if session_id is not None:
        actor = await SessionStore(await request.app[BACKENDS].pool()).end(session_id)
        if actor is not None:
            log.info("signed out", extra={"event": "auth.signed_out", "actor": actor})
    response = web.Response(status=204, headers=_NO_STORE)
    clear_cookie(response, SESSION_COOKIE, path="/")
    return response


async def session_state(request: web.Request) -> web.Response:
    client = request.app.get(OIDC)
    if client is None:
        return respond(SignInState())
    provider = provider_name(client.settings)
    session_id = session_cookie(request, client.settings)
    found = None if session_id is None else await SessionStore(await request.app[BACKENDS].pool()).lookup(session_id)
    if session_id is None or found is None:
        return respond(SignInState(provider=provider))
    return respond(
        SignInState(
            provider=provider,
            actor=found.actor,
            scopes=[s for s in SCOPES if s in found.scopes],  # type: ignore[misc]
            expires_at=found.expires_at,
            csrf=csrf_token(session_id),
        )
    )


ROUTES = (
    Route("GET", "/auth/session", session_state, "Whether the console offers sign-in, and who is signed in here",
          response=SignInState, errors=DB_ERRORS, scope="public"),
    Route("GET", "/auth/login", sign_in, "Sign in: a redirect to the identity provider (OpenID Connect)",
          status=302, content_type="text/plain", errors=(web.HTTPNotFound, *DB_ERRORS), scope="public"),
    Route("GET", "/auth/callback", callback, "Where the identity provider sends the browser back",
          status=302, content_type="text/plain", errors=(web.HTTPNotFound, *DB_ERRORS), scope="public"),
    Route("POST", "/auth/logout", sign_out, "Sign out: the session ends at once on every replica", status=204,
          errors=DB_ERRORS, scope="public"),
)  # fmt: skip
