"""Who is calling, and may they: bearer tokens, scopes, protected mode, cross-origin refusal.

Every request passes `auth_middleware`, which finds the caller's Principal and checks it
holds the route's scope (api.routing.scope_of) before the handler runs:

- `Authorization: Bearer <token>`: CRONOS_ADMIN_TOKEN (scope admin, actor `admin-token`),
  CRONOS_METRICS_TOKEN (GET /metrics only), or a stored token, looked up on every request
  (no cache: a revocation holds at once on every replica). Bad, expired, revoked: 401.
- No token, CRONOS_AUTH=auto, and no token ever created (protected mode, like Redis's): a
  client whose peer address AND Host header are loopback acts as admin (actor `local`);
  anyone else gets a 403 that says how to create a token. Once a token has been created,
  every request needs one, even after the last one expires or is revoked, until the operator
  runs `cronos token reopen-local`. CRONOS_AUTH=required: always a token. In protected mode
  the API listens only on loopback (`listen_host`, `check_listen_host`).
- No token, and the console's session cookie (people signed in with OpenID Connect, api.routes_signin):
  the session's person, looked up on every request like a token (actor `oidc:<email>`, the scopes
  their groups granted). A non-GET request carrying the cookie must carry its CSRF header too
  (api.console_session), on every route; a request with a bearer token is judged by its token alone.
- A non-GET request whose `Origin` is not the API's own is refused (a web page must not be
  able to drive the API through a browser on the operator's machine).
- Routes of scope `public` need no token: /health, /openapi.json, and the console's page `/`
  and its files under `/ui/` (api.routes_ui: static, holding no data; the page's own API calls
  carry the user's token and are checked like any other).

Refusals are problem bodies (RFC 9457) like api.errors'; PostgreSQL down while deciding: 503.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

import msgspec
from aiohttp import web, web_response

from api.console_session import CSRF_HEADER, csrf_holds, session_cookie
from api.errors import PROBLEM_JSON, Handler, Problem
from api.routing import Scope
from api.state import BACKENDS, ROUTE_SCOPES
from cronos.errors import ConfigError
from cronos.scopes import effective
from cronos.settings import Settings
from cronos.store import audit
from cronos.store.sessions import SessionStore
from cronos.store.tokens import Refusal, TokenInfo, TokenStore

log = logging.getLogger("cronos.api.auth")

METRICS_ACTOR = "metrics-token"
HOW_TO = (
    "create a token on the server with `cronos token create --name NAME --scope admin`, "
    "then send it as `Authorization: Bearer <token>`"
)
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Principal:
    name: str  # the actor in the audit trail
    scopes: frozenset[str]  # effective: admin holds write, write holds read

    def holds(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def admin(self) -> bool:
        return "admin" in self.scopes


PRINCIPAL = web.RequestKey("principal", Principal)  # the caller, set before the handler runs

LOCAL = Principal(audit.LOCAL, effective(["admin"]))
ADMIN = Principal(audit.ADMIN_TOKEN, effective(["admin"]))
METRICS = Principal(METRICS_ACTOR, frozenset({"metrics"}))


_TITLES = {400: "Bad request", 401: "Unauthorized", 429: "Too many requests", 502: "Bad gateway"}


class Denied(Exception):
    """A refusal with its problem body: 401 (who are you?) or 403 (not you, not this)."""

    def __init__(self, status: int, slug: str, detail: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.slug, self.detail, self.headers = status, slug, detail, headers or {}

    def response(self) -> web.Response:
        title = _TITLES.get(self.status, "Forbidden")
        body = Problem(type=f"urn:cronos:problem:{self.slug}", title=title, status=self.status, detail=self.detail)
        return web.Response(
            body=msgspec.json.encode(body), status=self.status, content_type=PROBLEM_JSON, headers=self.headers
        )


def unauthorized(detail: str, *, invalid: bool = False) -> Denied:
    # RFC 6750: a challenge on every 401; error="invalid_token" when one was sent but refused.
    challenge = 'Bearer realm="cronos"' + (', error="invalid_token"' if invalid else "")
    return Denied(401, "unauthorized", detail, headers={"WWW-Authenticate": challenge})


def forbidden(principal: Principal, scope: str, what: str = "this request") -> Denied:
    held = ", ".join(s for s in ("read", "write", "admin", "metrics") if s in principal.scopes) or "none"
    return Denied(
        403, "forbidden", f"{what} needs scope `{scope}`; `{principal.name}` holds {held}", headers=_CHALLENGE_SCOPE
    )


_CHALLENGE_SCOPE = {"WWW-Authenticate": 'Bearer realm="cronos", error="insufficient_scope"'}


# --- pure decisions -------------------------------------------------------------------------


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def is_loopback_peer(peer: str | None) -> bool:
    addr = None if peer is None else _address(peer)
    return addr is not None and addr.is_loopback


def host_name(host: str) -> str:
    """A Host header's name or address without its port: `[::1]:3002` -> `::1`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def is_loopback_host(host: str | None) -> bool:
    """`localhost`, an address in 127.0.0.0/8, or `[::1]`, with or without a port. Anything
    else (any other name, even one that resolves to 127.0.0.1) is not: DNS rebinding."""
    if not host:
        return False
    name = host_name(host)
    if name in ("localhost", "localhost."):
        return True
    addr = _address(name)
    return addr is not None and addr.is_loopback


def same_origin(origin: str, host: str | None) -> bool:
    """The Origin header names this API (its Host; the scheme may differ behind a TLS proxy)."""
    try:
        netloc = urlsplit(origin.strip()).netloc.lower()
    except ValueError:
        return False
    return bool(netloc) and host is not None and netloc == host.strip().lower()


def bearer(header: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>`; None without the header; '' when malformed."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _equal(given: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def local_admin_possible(settings: Settings) -> bool:
    """Protected mode may serve loopback clients as admin: CRONOS_AUTH=auto, no admin token."""
    return settings.auth == "auto" and not settings.admin_token


def listen_host(settings: Settings) -> str:
    """CRONOS_API_HOST, else loopback where protected mode is possible, every interface where
    each request needs a token (containers and pods, which set CRONOS_AUTH=required)."""
    return settings.api_host or ("127.0.0.1" if local_admin_possible(settings) else "0.0.0.0")


def loopback_only(host: str) -> bool:
    """A listen address that accepts only this machine: `localhost` or a loopback address."""
    return host.strip().lower() in ("localhost", "localhost.") or is_loopback_peer(host.strip("[]"))


def check_listen_host(settings: Settings, host: str) -> None:
    """Refuse to serve protected mode beyond loopback: a proxy or NAT on the host would make
    every network client look local, and any of them would act as admin (issue 22)."""
    if local_admin_possible(settings) and not loopback_only(host):
        raise ConfigError(
            f"CRONOS_API_HOST={host} is not loopback-only, and with CRONOS_AUTH=auto loopback clients act as admin "
            "while no token exists: set CRONOS_AUTH=required (tokens always needed) or CRONOS_API_HOST=127.0.0.1"
        )


def mode_of(settings: Settings) -> tuple[int, str]:
    """The startup log line's level and text: which authentication mode is in force."""
    if settings.auth == "required":
        return logging.INFO, "auth required: every request but the public routes needs a token"
    if settings.admin_token:
        return logging.INFO, "auth auto with CRONOS_ADMIN_TOKEN: every request but the public routes needs a token"
    return logging.WARNING, (
        "protected mode possible (CRONOS_AUTH=auto): until a token is first created (or after "
        "`cronos token reopen-local`), loopback clients act as admin without a token (behind a reverse proxy on "
        "this host, every client would); set CRONOS_AUTH=required to always require one"
    )


# --- the middleware ---------------------------------------------------------------------------


async def _from_token(request: web.Request, token: str) -> Principal:
    backends = request.app[BACKENDS]
    settings = backends.settings
    if _equal(token, settings.admin_token):
        return ADMIN
    if _equal(token, settings.metrics_token):
        return METRICS
    found = await TokenStore(await backends.pool()).authenticate(token)
    if isinstance(found, Refusal):
        raise unauthorized(f"{found.value}; {HOW_TO}", invalid=True)
    return _principal(found)


async def _from_session(request: web.Request, session_id: str) -> Principal:
    found = await SessionStore(await request.app[BACKENDS].pool()).lookup(session_id)
    if found is None:
        raise unauthorized("console session ended or expired: sign in again (or send a bearer token)")
    return Principal(found.actor, effective(found.scopes))


def _principal(token: TokenInfo) -> Principal:
    return Principal(token.name, effective(token.scopes))


async def _without_token(request: web.Request) -> Principal:
    backends = request.app[BACKENDS]
    settings = backends.settings
    if settings.auth == "required" or settings.admin_token:
        raise unauthorized(f"missing bearer token; {HOW_TO}")
    if not await TokenStore(await backends.pool()).local_admin_open():
        raise unauthorized(f"missing bearer token (a token was created, so loopback clients need one too); {HOW_TO}")
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    address = peer[0] if isinstance(peer, tuple) and peer else None
    if is_loopback_peer(address) and is_loopback_host(request.headers.get("Host")):
        return LOCAL
    log.warning(
        "protected mode refused a client",
        extra={"event": "auth.protected_mode", "remote": address, "path": request.path},
    )
    raise Denied(
        403,
        "protected-mode",
        "Cronos is in protected mode: no API token exists yet, so it serves only clients on this machine "
        "(loopback address and a Host header of localhost, 127.0.0.1 or [::1]); to call it from elsewhere, " + HOW_TO,
    )


async def principal_for(request: web.Request, scope: Scope) -> Principal | None:
    """The caller, checked for `scope`; None for a public route. Raises Denied."""
    origin = request.headers.get("Origin")
    if (
        request.method not in _SAFE_METHODS
        and origin is not None
        and not same_origin(origin, request.headers.get("Host"))
    ):
        raise Denied(403, "cross-origin", f"cross-origin {request.method} refused (Origin is not this API's)")
    token = bearer(request.headers.get("Authorization"))
    session_id = None if token is not None else session_cookie(request, request.app[BACKENDS].settings)
    unsafe = request.method not in _SAFE_METHODS
    if unsafe and session_id is not None and not csrf_holds(session_id, request.headers.get(CSRF_HEADER)):
        raise Denied(403, "csrf", f"a {request.method} with the console's session cookie needs its {CSRF_HEADER}")
    if scope == "public":
        return None
    if "access_token" in request.query:
        raise unauthorized("tokens are not accepted in the query string; send `Authorization: Bearer <token>`")
    if token == "":
        raise unauthorized("malformed Authorization header; send `Authorization: Bearer <token>`", invalid=True)
    if token is not None:
        principal = await _from_token(request, token)
    elif session_id is not None:
        principal = await _from_session(request, session_id)
    else:
        principal = await _without_token(request)
    needed = "read" if scope == "metrics" and not principal.holds("metrics") else scope
    if not principal.holds(needed):
        raise forbidden(principal, needed)
    return principal


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    route = request.match_info.route
    # A path or method with no route: still only for callers allowed to read (no probing).
    scope = request.app[ROUTE_SCOPES].get(route, "read")
    try:
        principal = await principal_for(request, scope)
        if principal is not None:
            request[PRINCIPAL] = principal
        return await handler(request)
    except Denied as exc:
        return exc.response()


def principal_of(request: web.Request) -> Principal:
    return request[PRINCIPAL]


SERVER = "Cronos"


_JSON_TYPES = frozenset({"application/json", PROBLEM_JSON})


async def hide_server(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: no library or Python version in `Server`, on every response; a JSON
    body (data or problem) is never sniffed as another type nor kept by a cache (it may hold a
    job's fields, a run's result or a token shown once)."""
    response.headers["Server"] = SERVER
    if response.content_type in _JSON_TYPES:
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers.setdefault("Cache-Control", "no-store")


def hide_server_default() -> None:
    """Also for the responses aiohttp makes before any route matched (a malformed request's
    400), which skip on_response_prepare: its module default (read per response) says Cronos.
    tests/integration/test_api_auth.py notices if an aiohttp upgrade moves it."""
    setattr(web_response, "SERVER_SOFTWARE", SERVER)  # noqa: B010  (not a re-exported name)
