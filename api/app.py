"""The aiohttp application: middleware, routes, and the lifetime of its connections."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web import BaseRequest

from api import (
    cluster,
    health,
    jobs_file,
    output_follow,
    routes_backfill,
    routes_bulk,
    routes_calendars,
    routes_cancel,
    routes_channels,
    routes_console,
    routes_fleet,
    routes_groups,
    routes_hooks,
    routes_job_health,
    routes_jobs,
    routes_joins,
    routes_namespaces,
    routes_run_output,
    routes_run_views,
    routes_runs,
    routes_schedule,
    routes_signin,
    routes_ticks,
    routes_tokens,
    routes_trigger,
    routes_ui,
)
from api.auth import auth_middleware, hide_server, hide_server_default
from api.backends import Backends
from api.errors import problem_middleware
from api.oidc import OidcClient, check_installed
from api.openapi import openapi_handler
from api.routing import Route, scope_of
from api.state import BACKENDS, OIDC, ROUTE_SCOPES
from cronos import __version__
from cronos.settings import Settings

MAX_BODY_BYTES = 1024 * 1024  # bodies above this get a 413

ROUTES: tuple[Route, ...] = (
    *health.ROUTES,
    *routes_job_health.ROUTES,
    *routes_joins.ROUTES,
    *routes_jobs.ROUTES,
    *routes_trigger.ROUTES,
    *routes_hooks.ROUTES,
    *routes_backfill.ROUTES,
    *routes_bulk.ROUTES,
    *routes_runs.ROUTES,
    *routes_cancel.ROUTES,
    *routes_run_views.ROUTES,
    *routes_run_output.ROUTES,
    *routes_ticks.ROUTES,
    *routes_calendars.ROUTES,
    *routes_groups.ROUTES,
    *cluster.ROUTES,
    *routes_tokens.ROUTES,
    *routes_namespaces.ROUTES,
    *routes_channels.ROUTES,
    *jobs_file.ROUTES,
    *routes_schedule.ROUTES,
    *routes_fleet.ROUTES,
    *routes_console.ROUTES,
    *routes_ui.ROUTES,
    *routes_signin.ROUTES,
)

# Probes and scrapes hit these every few seconds: their access lines go to DEBUG.
_QUIET = frozenset({"/health", "/metrics"})


class AccessLogger(AbstractAccessLogger):
    """One structured line per request (an event name plus fields, never the body)."""

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        level = logging.DEBUG if request.path in _QUIET and response.status < 500 else logging.INFO
        self.logger.log(
            level,
            f"{request.method} {request.path} {response.status}",
            extra={
                "event": "http.request",
                "method": request.method,
                "path": request.path,
                "status": response.status,
                "duration_ms": round(time * 1000, 2),
                "remote": request.remote,
            },
        )


ACCESS_LOG = logging.getLogger("cronos.api.access")


class MalformedRequests(logging.Filter):
    """aiohttp logs each request its parser refuses (and answers with a 400 itself) at ERROR with
    a traceback: anyone could flood the logs with them. One INFO line each instead, no traceback;
    any other error (a handler's 500) keeps its level and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        remote = record.args[0] if isinstance(record.args, tuple) and record.args else None
        level = min(record.levelno, logging.INFO)  # aiohttp logs a first-request bad method at DEBUG
        record.levelno, record.levelname = level, logging.getLevelName(level)
        record.msg, record.args = "malformed request refused", ()
        record.exc_info, record.exc_text = None, None
        record.event, record.remote = "http.malformed", remote
        record.status, record.reason = exc.code, str(exc.message)[:200]
        return SERVER_LOG.isEnabledFor(level)


# aiohttp's connection-level errors (its `logger`): a request it could not parse, a handler's crash.
SERVER_LOG = logging.getLogger("cronos.api.server")
SERVER_LOG.addFilter(MalformedRequests())


def create_app(settings: Settings) -> web.Application:
    # auth inside problem_middleware: a refusal is a response, a database down while deciding a 503.
    app = web.Application(middlewares=[problem_middleware, auth_middleware], client_max_size=MAX_BODY_BYTES)
    app[BACKENDS] = Backends(settings)
    if settings.oidc_issuer:
        check_installed()
        app[OIDC] = OidcClient(settings)
    # The document holds no secret (no data, only the API's shape): public, so clients and
    # tools can read how to authenticate before they hold a token.
    openapi = dataclasses.replace(openapi_handler(ROUTES, __version__), scope="public")
    app[ROUTE_SCOPES] = {}
    for route in (*ROUTES, openapi):
        added = app.router.add_route(route.method, route.path, route.handler, name=route.handler.__name__)
        app[ROUTE_SCOPES][added] = scope_of(route)
    output_follow.setup(app, settings.database_url)
    app.on_response_prepare.append(hide_server)
    hide_server_default()

    async def connections(app: web.Application) -> AsyncIterator[None]:
        yield
        await app[BACKENDS].close()

    app.cleanup_ctx.append(connections)
    return app
