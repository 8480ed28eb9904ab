"""GET /openapi.json, generated from the route table and the msgspec Structs.

Every registered route is described from the same Route entry the app registers, so
the document cannot miss one; error responses come from the error table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec
from aiohttp import web

from api.errors import PROBLEM_JSON, Problem, kind_for
from api.routing import Errors, Route

_PARAM = re.compile(r"\{(\w+)(?::[^}]*)?\}")
_REF = "#/components/schemas/{name}"


def build_spec(routes: Sequence[Route], version: str) -> dict[str, Any]:
    structs: list[type[Any]] = [Problem]
    for route in routes:
        structs += [t for t in (route.body, route.response, *(a[2] for a in route.also)) if t is not None]
    unique = list(dict.fromkeys(structs))
    refs, components = msgspec.json.schema_components(unique, ref_template=_REF)
    ref_of = dict(zip(unique, refs, strict=True))
    problem = {"content": {PROBLEM_JSON: {"schema": ref_of[Problem]}}}

    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        path = _PARAM.sub(r"{\1}", route.path)
        op: dict[str, Any] = {"summary": route.summary, "operationId": route.handler.__name__}
        params: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}
            for name in _PARAM.findall(route.path)
        ]
        for q in route.query:
            schema: dict[str, Any] = (
                {"type": "string"} if q.maximum is None else {"type": "integer", "minimum": 1, "maximum": q.maximum}
            )
            if q.enum:
                schema["enum"] = list(q.enum)
            params.append(
                {"name": q.name, "in": "query", "required": False, "description": q.description, "schema": schema}
            )
        if params:
            op["parameters"] = params
        if route.body is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref_of[route.body]}}}
        ok: dict[str, Any] = {"description": "success"}
        if route.response is not None:
            ok["content"] = {route.content_type: {"schema": ref_of[route.response]}}
        elif route.content_type != "application/json":
            ok["content"] = {route.content_type: {"schema": {"type": "string"}}}
        responses: dict[str, Any] = {str(route.status): ok}
        for status, description, struct in route.also:
            extra: dict[str, Any] = {"description": description}
            if struct is not None:
                extra["content"] = {"application/json": {"schema": ref_of[struct]}}
            responses[str(status)] = extra
        # Every route may answer a wrong method and, on a bug, a 500 (Exception: the table's INTERNAL).
        errors: Errors = (*route.errors, web.HTTPMethodNotAllowed, Exception)
        for error in errors:
            kind = kind_for(error)
            responses[str(kind.status)] = {"description": kind.title, **problem}
        op["responses"] = responses
        paths.setdefault(path, {})[route.method.lower()] = op

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Cronos Distributed Scheduler",
            "version": version,
            "description": "Register cron jobs, trigger them and read their runs. Errors are RFC 9457 "
            "problem bodies whose `field` is the JSON path of the offending input.",
        },
        "paths": paths,
        "components": {"schemas": components},
    }


def openapi_handler(routes: Sequence[Route], version: str) -> Route:
    """The /openapi.json route; the document is built once and describes itself too."""
    cache: dict[str, bytes] = {}

    async def openapi(request: web.Request) -> web.Response:
        if "doc" not in cache:
            cache["doc"] = msgspec.json.encode(build_spec([*routes, route], version))
        return web.Response(body=cache["doc"], content_type="application/json")

    route = Route("GET", "/openapi.json", openapi, "This document (OpenAPI 3.1)")
    return route
