"""The payload of each kind of work (task, http, shell): its Struct and the checks the API and
`cronos apply` run on it. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec

from cronos.errors import InvalidInput
from cronos.host_limits import DEFAULT_HOST_LIMIT, MAX_HOST_LIMIT

# The API validates a job's payload against its kind.
#
# The patterns describe the shapes in the OpenAPI document too (JSON Schema regexes, so no
# lookbehind and no \Z); msgspec matches them with re.search, where `$` also matches before a
# final newline, so check_payload() re-checks exactly what they are meant to keep out.


def _any_case(word: str) -> str:
    """`te` -> `[Tt][Ee]`: JSON Schema regexes have no case-insensitive flag."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


# Headers the client library frames the request with: a job setting them could smuggle a request.
FRAMING_HEADERS = ("content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 7230 token
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # any C0 control but HTAB, and DEL
_URL_CONTROL = re.compile(r"[\x00-\x20\x7f\\]")  # and no space or backslash in a URL
# Env names the child must not get from a job: they choose what runs or how.
_ENV_REFUSED = re.compile(r"PATH$|LD_|PYTHON")
_PORT = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"


def _ipv6_pattern() -> str:
    """RFC 3986's IPv6address as a regex (what Python's ipaddress accepts, without a zone)."""
    h16, octet = "[0-9A-Fa-f]{1,4}", "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
    ls32 = rf"(?:{h16}:{h16}|{octet}(?:\.{octet}){{3}})"
    forms = [
        rf"(?:{h16}:){{6}}{ls32}",
        rf"::(?:{h16}:){{5}}{ls32}",
        rf"(?:{h16})?::(?:{h16}:){{4}}{ls32}",
        *(rf"(?:(?:{h16}:){{0,{n - 1}}}{h16})?::(?:{h16}:){{{4 - n}}}{ls32}" for n in (2, 3)),
        rf"(?:(?:{h16}:){{0,3}}{h16})?::{h16}:{ls32}",
        rf"(?:(?:{h16}:){{0,4}}{h16})?::{ls32}",
        rf"(?:(?:{h16}:){{0,5}}{h16})?::{h16}",
        rf"(?:(?:{h16}:){{0,6}}{h16})?::",
    ]
    return "(?:" + "|".join(forms) + ")"


# ASCII only in user-info and host (RFC 3986; an IDN host as its xn-- form), so every parser reads
# the same host: Python's urlsplit refuses some Unicode there, yarl would re-encode it.
URL_PATTERN = (
    r"^https?://(?:[A-Za-z0-9._~!$&'()*+,;=:%-]*@)?"  # user-info
    rf"(?:\[{_ipv6_pattern()}\]|[A-Za-z0-9._~!$&'()*+,;=-]+)"  # host: [IPv6] or a name/IPv4
    rf"(?::{_PORT})?"
    r"(?:[/?#][^\x00-\x20\x7f\\]*)?$"
)

# Names and values are checked by check_payload(), which names the header or variable; the
# patterns only describe them in the schema.
HeaderName = Annotated[
    str,
    msgspec.Meta(
        max_length=256,
        extra_json_schema={
            "pattern": f"^{_TOKEN.pattern}$",
            "not": {"pattern": f"^({'|'.join(_any_case(h) for h in FRAMING_HEADERS)})$"},
        },
    ),
]
Header = Annotated[
    str,
    msgspec.Meta(
        max_length=8192, description="no CR, LF, NUL", extra_json_schema={"pattern": r"^[^\x00-\x08\x0a-\x1f\x7f]*$"}
    ),
]
EnvName = Annotated[
    str,
    msgspec.Meta(
        max_length=256,
        description="not PATH, LD_* or PYTHON*",
        extra_json_schema={"pattern": r"^[^=\x00]+$", "not": {"pattern": f"^({_ENV_REFUSED.pattern})"}},
    ),
]

# What a pattern means, for error messages (a regex is no explanation).
PATTERN_MEANINGS = {
    URL_PATTERN: "must be an http:// or https:// URL with a host (ASCII; an IDN in its xn-- form) and "
    "a port from 1 to 65535 if any, without spaces, control characters or backslashes",
}


def explain(message: str) -> str:
    """A msgspec validation message with each known pattern replaced by what it means."""
    for pattern, meaning in PATTERN_MEANINGS.items():
        message = message.replace(f"Expected `str` matching regex {pattern!r}", meaning)
    return message


# No text anywhere in a payload may hold NUL (PostgreSQL cannot store it; the API checks all of it).
_NO_NUL = {"pattern": "^[^\\x00]*$"}
Text = Annotated[str, msgspec.Meta(extra_json_schema=_NO_NUL)]


class TaskPayload(msgspec.Struct, kw_only=True):
    """`task` jobs: `action` names a function registered with `@cronos.task`; the rest is its input."""

    action: Annotated[str, msgspec.Meta(min_length=1, max_length=200, extra_json_schema=_NO_NUL)]


class HttpPayload(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: Annotated[
        str,
        msgspec.Meta(
            pattern=URL_PATTERN,
            max_length=4096,
            description="an address-literal host in a refused range (loopback, private, link-local, CGNAT, "
            "multicast, reserved, unspecified; unless in CRONOS_HTTP_ALLOW_NETS) or localhost is refused; "
            "names are checked after resolution, at run time",
        ),
    ]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "POST"
    headers: dict[HeaderName, Header] = {}
    body: Any = None
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] | None = None
    expect_status: list[Annotated[int, msgspec.Meta(ge=100, le=599)]] | int | None = None
    follow_redirects: bool = False
    secrets_follow_redirects: Annotated[
        bool,
        msgspec.Meta(
            description="with follow_redirects: the job's secrets (sensitive headers, URL credentials, a body"
            " holding secrets) go on to other paths of the job's own origin and Host header too; never to"
            " another origin. Off: a hop to another path gets none of them"
        ),
    ] = False
    host_limit: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                le=MAX_HOST_LIMIT,
                description="this job's request starts only while fewer than this many requests are in flight to"
                " its host (scheme, host, port) on its executor; lowers the host's limit (CRONOS_HTTP_HOST_LIMITS,"
                f" default {DEFAULT_HOST_LIMIT}), never raises it (default: the host's)",
            ),
        ]
        | None
    ) = None


class ShellPayload(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    argv: Annotated[list[Text], msgspec.Meta(min_length=1)]
    env: dict[EnvName, Text] = {}
    cwd: Text | None = None


PAYLOAD_TYPES: dict[str, type[msgspec.Struct]] = {
    "task": TaskPayload,
    "http": HttpPayload,
    "shell": ShellPayload,
}


def validate_payload(kind: str, payload: dict[str, Any]) -> msgspec.Struct:
    """Decode `payload` as the struct of `kind`; raises msgspec.ValidationError with a `$.` path,
    or InvalidInput naming the field (`$.payload.env.PATH`) for what the types cannot say."""
    value = msgspec.convert(payload, PAYLOAD_TYPES[kind])
    check_payload(kind, value)
    return value


def check_payload(kind: str, value: msgspec.Struct) -> None:
    """What the payload struct's types cannot say; raises InvalidInput naming the field."""
    if isinstance(value, HttpPayload):
        _check_http(value)
    elif isinstance(value, ShellPayload):
        _check_shell(value)


def url_problem(url: str) -> str | None:
    """Why `url` is not an http(s) URL with a host Cronos can send to; None when it is."""
    if _URL_CONTROL.search(url):
        return "must not contain spaces, control characters or backslashes"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a bad port or an unclosed [IPv6]
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "has no host"
    if port == 0:
        return "port 0 is not a port"
    return None


def _check_http(payload: HttpPayload) -> None:
    if (problem := url_problem(payload.url)) is not None:
        raise InvalidInput("$.payload.url", problem)
    for name, value in payload.headers.items():
        if not _TOKEN.fullmatch(name):
            raise InvalidInput("$.payload.headers", f"header name {name!r} is not an RFC 7230 token")
        if name.lower() in FRAMING_HEADERS:
            raise InvalidInput(f"$.payload.headers.{name}", "is set by the HTTP client; a job may not set it")
        if _CONTROL.search(value):  # the value itself is never quoted: it may be a secret
            raise InvalidInput(f"$.payload.headers.{name}", "must not contain CR, LF, NUL or other control characters")


def _check_shell(payload: ShellPayload) -> None:
    for name in payload.env:
        if not name or "=" in name or "\x00" in name:
            raise InvalidInput("$.payload.env", f"variable name {name!r} must be non-empty, without '=' or NUL")
        if _ENV_REFUSED.match(name):
            raise InvalidInput(
                f"$.payload.env.{name}", "a job may not set PATH, LD_* or PYTHON*: they choose what the child runs"
            )
