"""The API's one error table: exception class -> HTTP status, and the problem body (RFC 9457).

Handlers raise CronosErrors (or let aiohttp raise its HTTP errors); one middleware turns
each into an `application/problem+json` body whose `detail` names the offending field.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec
from aiohttp import web

from cronos.errors import BackendUnavailable, Conflict, CronosError, InvalidInput, NotFound, TooManyRequests
from cronos.logs import mask_secrets
from cronos.payloads import explain

log = logging.getLogger("cronos.api")

PROBLEM_JSON = "application/problem+json"


class MalformedBody(CronosError):
    """The request body is not JSON at all (as opposed to JSON with a bad field)."""


@dataclass(frozen=True, slots=True)
class ErrorKind:
    status: int
    slug: str
    title: str

    @property
    def type(self) -> str:
        return f"urn:cronos:problem:{self.slug}"


# THE table. Looked up along the exception's MRO, so subclasses (InvalidSchedule) inherit.
ERRORS: dict[type[BaseException], ErrorKind] = {
    MalformedBody: ErrorKind(400, "malformed-body", "Malformed JSON body"),
    web.HTTPNotFound: ErrorKind(404, "not-found", "Not found"),
    NotFound: ErrorKind(404, "not-found", "Not found"),
    web.HTTPMethodNotAllowed: ErrorKind(405, "method-not-allowed", "Method not allowed"),
    web.HTTPRequestTimeout: ErrorKind(408, "body-timeout", "Request body not received in time"),
    Conflict: ErrorKind(409, "conflict", "Conflict"),
    web.HTTPRequestEntityTooLarge: ErrorKind(413, "body-too-large", "Request body too large"),
    web.HTTPUnsupportedMediaType: ErrorKind(415, "unsupported-media-type", "Unsupported media type"),
    InvalidInput: ErrorKind(422, "invalid-input", "Invalid input"),
    TooManyRequests: ErrorKind(429, "too-many-requests", "Too many requests"),
    BackendUnavailable: ErrorKind(503, "backend-unavailable", "Backend unavailable"),
}
INTERNAL = ErrorKind(500, "internal", "Internal server error")


class Problem(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An error body (RFC 9457). `field` is the JSON path of the offending input, when there is one."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None


def kind_for(cls: type[BaseException]) -> ErrorKind:
    """The row of `cls` or of its nearest ancestor in the table; INTERNAL when there is none."""
    for base in cls.__mro__:
        if base in ERRORS:
            return ERRORS[base]
    return INTERNAL


def kind_of(exc: BaseException) -> ErrorKind:
    kind = kind_for(type(exc))
    if kind is INTERNAL and isinstance(exc, web.HTTPException):
        return ErrorKind(exc.status, "http-error", exc.reason)
    return kind


def problem(exc: BaseException, path: str | None = None) -> web.Response:
    kind = kind_of(exc)
    field = exc.field if isinstance(exc, InvalidInput) else None
    if isinstance(exc, InvalidInput):
        detail = f"{exc.field}: {exc.message}"
    elif isinstance(exc, web.HTTPMethodNotAllowed):
        detail = f"{exc.method} is not allowed here; allowed: {', '.join(sorted(exc.allowed_methods))}"
    elif isinstance(exc, web.HTTPNotFound) and path is not None:
        detail = f"no such resource: {path}"
    elif isinstance(exc, web.HTTPException):
        detail = exc.text or exc.reason
    elif kind is INTERNAL:
        detail = "unexpected error; see the server log"
    else:
        detail = str(exc)
    # Messages name fields, never values; masking is the backstop for a URL or token quoted anyway.
    body = Problem(type=kind.type, title=kind.title, status=kind.status, detail=mask_secrets(detail), field=field)
    headers = {"Allow": exc.headers["Allow"]} if isinstance(exc, web.HTTPMethodNotAllowed) else None
    response = web.Response(
        body=msgspec.json.encode(body), status=kind.status, content_type=PROBLEM_JSON, headers=headers
    )
    if kind.status == 408:  # the rest of the body may still be on its way: do not read it as a request
        response.force_close()
    return response


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


_NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _media_refusal(request: web.BaseRequest) -> web.HTTPUnsupportedMediaType | None:
    """A body must be JSON in UTF-8: a web page's form post (text/plain, form-urlencoded) is
    refused before anything reads it. No body (pause, trigger, ...) needs no type."""
    if request.method in _NO_BODY_METHODS or not request.body_exists:
        return None
    if request.content_type == "application/json" and (request.charset or "utf-8").lower() in ("utf-8", "utf8"):
        return None
    given = request.headers.get("Content-Type", "none")[:100]
    return web.HTTPUnsupportedMediaType(text=f"a request body must be application/json (UTF-8), not {given!r}")


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        if (refusal := _media_refusal(request)) is not None:
            raise refusal
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return problem(exc, request.path)
    except CronosError as exc:
        if isinstance(exc, BackendUnavailable):
            log.warning("backend unavailable", extra={"event": "api.backend_unavailable", "backend": exc.backend})
        return problem(exc)
    except Exception as exc:  # the one place that turns a bug into a 500
        log.exception("unhandled error", extra={"event": "api.error", "method": request.method, "path": request.path})
        return problem(exc)


# --- msgspec validation errors -> InvalidInput naming the field ------------------------

_AT = re.compile(r"^(?P<msg>.*?)(?: - at (?P<key>`key` in )?`(?P<path>\$[^`]*)`)?$", re.DOTALL)
_NAMED = re.compile(r"(?:missing required|unknown) field `(?P<name>[^`]+)`")


def invalid_input(exc: msgspec.ValidationError, base: str = "$") -> InvalidInput:
    """`Expected int - at $.timeout_s` -> InvalidInput("$.timeout_s", ...); paths rebased onto `base`.

    Missing and unknown fields are reported at the object holding them; the field named
    is the missing/unknown one itself, e.g. `$.payload.action`.
    """
    match = _AT.match(str(exc))
    assert match is not None  # the pattern matches any string
    message, path = match["msg"], match["path"] or "$"
    if named := _NAMED.search(message):
        path = f"{path}.{named['name']}"
    message = explain(message)
    if match["key"]:  # msgspec does not say which key: the object holding it is named
        message = f"a key: {message}"
    return InvalidInput(base + path[1:], message)
