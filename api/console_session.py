"""The console's session cookie and its CSRF token (docs/sign-in.md).

The cookie holds the session id: HttpOnly (no script reads it), SameSite=Lax (no other site's
page sends it with a POST), Secure when the console's URL is https. A request that changes
something and carries the cookie (not a bearer token) must also send `X-CSRF-Token`: an HMAC
of the session id that only a page of this origin can learn (GET /auth/session), so a
forged request from another site, which the browser would send with the cookie, lacks it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from aiohttp import web

from cronos.settings import Settings

SESSION_COOKIE = "cronos_session"
LOGIN_COOKIE = "cronos_login"  # the state of a sign-in under way, bound to this browser
LOGIN_PATH = "/auth/"
CSRF_HEADER = "X-CSRF-Token"


def csrf_token(session_id: str) -> str:
    mac = hmac.new(session_id.encode(), b"cronos-csrf", hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def csrf_holds(session_id: str, header: str | None) -> bool:
    return header is not None and hmac.compare_digest(header.encode(), csrf_token(session_id).encode())


def session_cookie(request: web.Request, settings: Settings) -> str | None:
    """The session id the browser sent, when sign-in is on; None otherwise."""
    if not settings.oidc_issuer:
        return None
    return request.cookies.get(SESSION_COOKIE) or None


def set_cookie(response: web.StreamResponse, settings: Settings, name: str, value: str, *, path: str,
               max_age: float) -> None:  # fmt: skip
    secure = settings.oidc_redirect_base.startswith("https://")
    response.set_cookie(
        name, value, path=path, max_age=int(max_age), httponly=True, samesite="Lax", secure=secure or None
    )


def clear_cookie(response: web.StreamResponse, name: str, *, path: str) -> None:
    response.del_cookie(name, path=path)
