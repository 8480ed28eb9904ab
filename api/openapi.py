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

from api.bodies import MAX_ID
from api.errors import PROBLEM_JSON, Problem, kind_for
from api.routing import Errors, Route, scope_of
from cronos.payloads import PAYLOAD_TYPES

_PARAM = re.compile(r"\{(\w+)(?::[^}]*)?\}")
_REF = "#/components/schemas/{name}"
_BEARER = "bearer"
_KINDS = {kind: f"{kind.capitalize()}Job" for kind in PAYLOAD_TYPES}  # task -> TaskJob
_NO_BODY_METHODS = ("GET", "HEAD", "OPTIONS")

# Cursors are opaque: only a `next_cursor` of a previous page is one (format named for tools).
CURSOR_SCHEMA: dict[str, Any] = {
    "type": "string",
    "format": "cronos-cursor",
    "maxLength": 40,
    "description": "opaque; pass the `next_cursor` of the previous page, unchanged",
}
_SCOPES = {
    "read": "a token with scope read (write and admin hold read)",
    "write": "a token with scope write (admin holds write)",
    "admin": "a token with scope admin",
    "metrics": "the metrics token (CRONOS_METRICS_TOKEN) or a token with scope read",
}


def kind_variants(components: dict[str, Any], ref_of: dict[type[Any], dict[str, Any]], ref: str = _REF) -> None:
    """A job's payload depends on its kind: JobCreate, JobPatch and JobOut get a oneOf on `kind`
    (`ref`: where the components live, `#/$defs/{name}` in a plain JSON Schema)."""
    for kind, name in _KINDS.items():
        components[name] = {
            "title": name,
            "type": "object",
            "description": f"a `{kind}` job's kind and payload",
            "properties": {"kind": {"const": kind}, "payload": ref_of[PAYLOAD_TYPES[kind]]},
            "required": ["kind", "payload"],
        }
    refs = [{"$ref": ref.format(name=name)} for name in _KINDS.values()]
    mapping = {kind: ref.format(name=name) for kind, name in _KINDS.items()}
    discriminated = {"oneOf": refs, "discriminator": {"propertyName": "kind", "mapping": mapping}}
    if "JobOut" in components:
        components["JobOut"].update(discriminated)
    if "JobCreate" in components:
        # `kind` defaults to task: without it, the payload is a task's.
        default_task = {
            "title": "TaskJob (kind omitted)",
            "not": {"required": ["kind"]},
            "properties": {"payload": ref_of[PAYLOAD_TYPES["task"]]},
        }
        components["JobCreate"]["oneOf"] = [*refs, default_task]
        components["JobCreate"]["allOf"] = [{"oneOf": [_RECURRING, _ONE_OFF, _INTERVAL]}]
        components["JobCreate"]["description"] += " `kind` (default task) chooses the payload's shape."
    if "JobPatch" in components:
        # Both or neither: a payload is checked against the job's kind as it will be.
        neither = {"title": "kind and payload unchanged", "not": {"anyOf": [{"required": [k]} for k in _KIND_KEYS]}}
        components["JobPatch"]["oneOf"] = [*refs, neither]
        unchanged = {"title": "schedule unchanged", "not": {"anyOf": [{"required": [k]} for k in _WHEN_KEYS]}}
        components["JobPatch"]["allOf"] = [{"oneOf": [unchanged, _RECURRING, _ONE_OFF, _INTERVAL]}]
        components["JobPatch"]["description"] += (
            " Send `kind` with `payload` (the server also takes a payload alone when it fits the stored kind)."
        )


_KIND_KEYS = ("kind", "payload")
# Exactly one of a cron expression, a one-off's run_at and an interval's every (a PATCH that sends
# one clears the others); an anchor only with every.
_WHEN_KEYS = ("cron_expression", "run_at", "every", "anchor")  # an anchor alone: send every with it
_NULL = {"type": "null"}
_RECURRING = {
    "title": "recurring (cron_expression)",
    "required": ["cron_expression"],
    "properties": {"cron_expression": {"type": "string"}, "run_at": _NULL, "every": _NULL, "anchor": _NULL},
}
_ONE_OFF = {
    "title": "one-off (run_at)",
    "required": ["run_at"],
    "properties": {
        "run_at": {"type": "string"},
        "cron_expression": _NULL,
        "every": _NULL,
        "anchor": _NULL,
        "schedules": {"maxItems": 0},
    },  # a one-off has no other schedules
}
_INTERVAL = {
    "title": "interval (every)",
    "required": ["every"],
    "properties": {"every": {"type": ["string", "integer"]}, "cron_expression": _NULL, "run_at": _NULL},
}


def _security(route: Route) -> list[dict[str, list[str]]]:
    scope = scope_of(route)
    return [] if scope == "public" else [{_BEARER: [scope]}]


def _auth_responses(route: Route, problem: dict[str, Any]) -> dict[str, Any]:
    if scope_of(route) == "public":
        if not route.own_auth:
            return {}
        return {
            "401": {"description": route.own_auth, **problem},
            "403": {"description": "the credential may not start this job (api.shell_authority)", **problem},
        }
    return {
        "401": {"description": "no token, or a token that is unknown, revoked or expired", **problem},
        "403": {
            "description": f"the token lacks the scope ({_SCOPES[scope_of(route)]} is needed); or, while no "
            "token exists, a client that is not on loopback; or a cross-origin write",
            **problem,
        },
    }


def _path_schema(placeholder: str) -> dict[str, Any]:
    """`{id:[0-9]+}` is an id (an integer); a bare `{name}` is any non-empty segment."""
    if ":[0-9]+}" in placeholder:
        return {"type": "integer", "minimum": 1, "maximum": MAX_ID}
    return {"type": "string", "minLength": 1, "maxLength": 200}


def build_spec(routes: Sequence[Route], version: str) -> dict[str, Any]:
    structs: list[type[Any]] = [Problem, *PAYLOAD_TYPES.values()]
    for route in routes:
        structs += [t for t in (route.body, route.response, *(a[2] for a in route.also)) if t is not None]
    unique = list(dict.fromkeys(structs))
    refs, components = msgspec.json.schema_components(unique, ref_template=_REF)
    ref_of = dict(zip(unique, refs, strict=True))
    problem = {"content": {PROBLEM_JSON: {"schema": ref_of[Problem]}}}
    kind_variants(components, ref_of)
    if "TokenCreate" in components:  # one expiry or none; what a schema can say of it
        token = components["TokenCreate"]
        token["not"] = {"required": ["expires_in_s", "expires_at"]}
        token["properties"]["expires_at"] = {
            "type": "string",
            "format": "date-time",
            "description": "an RFC 3339 time with its offset, in the future",
        }

    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        path = _PARAM.sub(r"{\1}", route.path)
        op: dict[str, Any] = {
            "summary": route.summary,
            "operationId": route.handler.__name__,
            "security": _security(route),
        }
        params: list[dict[str, Any]] = [
            {"name": m[1], "in": "path", "required": True, "schema": _path_schema(m[0])}
            for m in _PARAM.finditer(route.path)
        ]
        for q in route.query:
            schema: dict[str, Any] = (
                {"type": "string"} if q.maximum is None else {"type": "integer", "minimum": 1, "maximum": q.maximum}
            )
            if q.name == "cursor":
                schema = CURSOR_SCHEMA
            if q.schema is not None:
                schema = dict(q.schema)
            if q.enum:
                schema["enum"] = list(q.enum)
            params.append(
                {"name": q.name, "in": "query", "required": q.required, "description": q.description, "schema": schema}
            )
        if params:
            op["parameters"] = params
        if route.body is not None:
            content = {"application/json": {"schema": ref_of[route.body]}}
            op["requestBody"] = {"required": route.body_required, "content": content}
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
        if route.method not in _NO_BODY_METHODS:  # any body must be JSON, even where none is read
            errors = (*errors, web.HTTPUnsupportedMediaType)
        if route.body is not None:
            errors = (*errors, web.HTTPRequestTimeout)
        for error in errors:
            kind = kind_for(error)
            responses[str(kind.status)] = {"description": kind.title, **problem}
        responses.update(_auth_responses(route, problem))
        op["responses"] = dict(sorted(responses.items()))
        paths.setdefault(path, {})[route.method.lower()] = op

    _add_links(paths)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Cronos Distributed Scheduler",
            "version": version,
            "description": "Register cron jobs, trigger them and read their runs. Errors are RFC 9457 "
            "problem bodies whose `field` is the JSON path of the offending input.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                _BEARER: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "`Authorization: Bearer <token>`; tokens from `cronos token create` or "
                    "POST /api/tokens. While no token exists, loopback clients need none (protected mode). "
                    "An operation's `security` names the scope it needs.",
                }
            },
        },
    }


# Where an id in a response leads (OpenAPI links; schemathesis' stateful mode follows them): a created
# job's id to every operation on that job, a queued run's id to that run.
_LINKS = (("/api/jobs", "post", "/api/jobs/{id}"), ("/api/jobs/{id}/trigger", "post", "/api/runs/{id}"))


def _add_links(paths: dict[str, dict[str, Any]]) -> None:
    for source, method, prefix in _LINKS:
        op = paths.get(source, {}).get(method)
        if op is None:
            continue
        targets = [o["operationId"] for path, ops in paths.items() if path.startswith(prefix) for o in ops.values()]
        ok = next(r for status, r in op["responses"].items() if status.startswith("2"))
        ok["links"] = {t: {"operationId": t, "parameters": {"id": "$response.body#/id"}} for t in sorted(targets)}


def openapi_handler(routes: Sequence[Route], version: str) -> Route:
    """The /openapi.json route; the document is built once and describes itself too."""
    cache: dict[str, bytes] = {}

    async def openapi(request: web.Request) -> web.Response:
        if "doc" not in cache:
            cache["doc"] = msgspec.json.encode(build_spec([*routes, route], version))
        return web.Response(body=cache["doc"], content_type="application/json")

    route = Route("GET", "/openapi.json", openapi, "This document (OpenAPI 3.1)", scope="public")
    return route
