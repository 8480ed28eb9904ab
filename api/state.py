"""Typed keys of what the application holds."""

from __future__ import annotations

from aiohttp import web
from aiohttp.web_urldispatcher import AbstractRoute

from api.backends import Backends
from api.oidc import OidcClient
from api.routing import Scope

BACKENDS = web.AppKey("backends", Backends)
# The scope each registered route needs (api.routing.scope_of), read by api.auth per request.
ROUTE_SCOPES = web.AppKey("route_scopes", dict[AbstractRoute, Scope])
# The console's OpenID Connect client, present when sign-in is configured (api.routes_signin).
OIDC = web.AppKey("oidc", OidcClient)
