"""Where an http job's secrets may go: one rule for a PATCH, a run's inputs and every request sent. Pure.

A job's secrets (what `cronos.redact` hides: sensitive headers, URL credentials, body secrets) were
entered for one place: its URL's scheme, host and port, its path, and the `Host` header it sent
(behind a shared ingress or CDN the Host header picks the tenant, as the host does; so may the
forwarding headers an ingress or a tenant's proxy trusts, ROUTING_HEADERS). A request may
carry them only to that place (`moved`). The API asks at save time (a PATCH keeping `***`, a run's
inputs: cronos.redact, cronos.inputs) and the executor asks again before each request and each
redirect hop (executor.kinds.http), so a place that slipped past the API still gets no secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

URL_FIELD = "$.payload.url"
HOST_FIELD = "$.payload.headers.Host"
# The headers that can pick the virtual host behind an ingress, CDN or proxy, lower-cased, with the
# spelling a 422 names them by.
ROUTING_HEADERS = {
    "host": "Host",
    "x-forwarded-host": "X-Forwarded-Host",
    "forwarded": "Forwarded",
    "x-original-host": "X-Original-Host",
    "x-host": "X-Host",
}
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Place(NamedTuple):
    """Where a request goes, as far as its secrets are concerned."""

    scheme: str
    host: str
    port: int | None
    path: str
    host_header: tuple[tuple[str, str], ...]  # every (routing header, value) sent (none: the URL's host)


def host_header(headers: object) -> tuple[tuple[str, str], ...]:
    """The routing headers in `headers` with their values (ROUTING_HEADERS; names and values
    compared case-insensitively)."""
    if not isinstance(headers, Mapping):
        return ()
    sent = ((str(k).lower(), str(v).strip().lower()) for k, v in headers.items())
    return tuple(sorted((name, value) for name, value in sent if name in ROUTING_HEADERS))


def place_of(url: str, headers: object) -> Place | None:
    """The place a request to `url` with `headers` goes to; None for a URL without scheme and host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not scheme or not parts.hostname:
        return None
    return Place(
        scheme, parts.hostname.lower(), port or _DEFAULT_PORTS.get(scheme), parts.path or "/", host_header(headers)
    )


def moved(entered: Place | None, request: Place | None, *, any_path: bool = False) -> str | None:
    """None when a request to `request` may carry the secrets entered for `entered`; otherwise the
    payload field that moved them (URL_FIELD, or the routing header's). `any_path`: the job lets its secrets
    follow redirects to other paths of its own origin (`secrets_follow_redirects`)."""
    if entered is None or request is None or entered[:3] != request[:3]:
        return URL_FIELD
    if entered.host_header != request.host_header:
        changed = set(entered.host_header) ^ set(request.host_header)
        return f"$.payload.headers.{ROUTING_HEADERS[min(changed)[0]]}"
    if not any_path and entered.path != request.path:
        return URL_FIELD
    return None
