"""A route declared once: the app registers it and /openapi.json describes it from the same entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal

from aiohttp import web

from api.bodies import DEFAULT_LIMIT, MAX_LIMIT
from api.errors import MalformedBody
from api.schemas import Health
from cronos.errors import BackendUnavailable, InvalidInput

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Exception classes a handler may raise; the error table (api.errors.ERRORS) gives their statuses.
Errors = tuple[type[BaseException], ...]

# Who may call a route: `public` anyone (/health); `metrics` the metrics token or a read token;
# otherwise a token holding that scope (admin holds every scope, write holds read).
Scope = Literal["public", "metrics", "read", "write", "admin"]

ID = "{id:[0-9]+}"  # anything else is not a route: 404


@dataclass(frozen=True, slots=True)
class Query:
    name: str
    description: str
    enum: tuple[str, ...] | None = None
    maximum: int | None = None  # set: an integer from 1 to this
    required: bool = False
    schema: dict[str, Any] | None = None  # its JSON schema, when more than a string


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    _: KW_ONLY
    status: int = 200
    body: type[Any] | None = None  # the request Struct
    body_required: bool = True  # False: the body may be left out (POST .../trigger)
    response: type[Any] | None = None  # the response Struct (None: no JSON body)
    errors: Errors = ()
    query: tuple[Query, ...] = ()
    content_type: str = "application/json"
    scope: Scope | None = None  # None: `read` for GET, `write` otherwise
    # Extra documented outcomes: status -> (description, Struct or None)
    also: tuple[tuple[int, str, type[Any] | None], ...] = ()
    own_auth: str = ""  # a public route checking a credential of its own (a trigger's secret): what 401 means


def scope_of(route: Route) -> Scope:
    if route.scope is not None:
        return route.scope
    return "read" if route.method in ("GET", "HEAD") else "write"


# Any route with a JSON body may refuse it: not JSON, too large, or a field that does not fit.
BODY_ERRORS: Errors = (MalformedBody, web.HTTPRequestEntityTooLarge, InvalidInput)
DB_ERRORS: Errors = (BackendUnavailable,)

HEALTH_DOWN = (503, "a backend is down; the body says which", Health)
PAGE = (
    Query("limit", f"page size, 1..{MAX_LIMIT} (default {DEFAULT_LIMIT})", maximum=MAX_LIMIT),
    Query("cursor", "`next_cursor` of the previous page"),
)
