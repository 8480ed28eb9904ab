"""A small synchronous client of the REST API, for `cronos jobs|runs|apply`.

It talks to `CRONOS_API_URL` with `CRONOS_API_TOKEN` (settings.api_url / api_token) and
turns every failure into one CronosError whose text is one line: the API's problem
`detail` (which names the field of a 422), or why the API could not be reached. Standard
library only: a command-line call needs no event loop.
"""

from __future__ import annotations

import contextlib
import http.client
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlsplit

import msgspec

from cronos import __version__, namespaces
from cronos.errors import CronosError

TIMEOUT_S = 30.0
PAGE = 500  # the API's largest page


class Event(NamedTuple):
    """One Server-Sent Event."""

    name: str
    id: str | None
    data: str


class ApiError(CronosError):
    """The API answered with an error (a problem body, RFC 9457)."""

    def __init__(self, status: int, detail: str, field: str | None = None) -> None:
        self.status, self.detail, self.field = status, detail, field
        where = f" ({field})" if field and field not in detail else ""
        super().__init__(f"{status}: {_one_line(detail)}{where}")


class ApiUnreachable(CronosError):
    """No HTTP answer at all: wrong URL, API down, network cut, timeout."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: it would carry the bearer token to wherever it points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _problem(status: int, raw: bytes) -> ApiError:
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        field = body.get("field")
        return ApiError(status, body["detail"], field if isinstance(field, str) else None)
    return ApiError(status, raw[:200].decode(errors="replace") or "no detail")


class ApiClient:
    def __init__(
        self, base_url: str, token: str = "", timeout_s: float = TIMEOUT_S, namespace: str = namespaces.DEFAULT
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.namespace = namespace
        self._timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_NoRedirects)

    def call(
        self, method: str, path: str, body: Any = None, query: Mapping[str, str | int | None] | None = None
    ) -> Any:
        """The decoded JSON answer (None for 204); raises ApiError or ApiUnreachable."""
        with self._open(method, path, body, query) as response:
            raw = response.read()
        return msgspec.json.decode(raw) if raw else None

    def events(self, path: str, query: Mapping[str, str | int | None] | None = None) -> Iterator[Event]:
        """The Server-Sent Events of a GET, as they arrive (the caller resumes when the stream breaks)."""
        with self._open("GET", path, None, query, accept="text/event-stream") as response:
            fields: dict[str, str] = {}
            for raw in response:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line:
                    name, _, value = line.partition(":")
                    if name:  # a line starting with ":" is a comment (a keepalive)
                        fields[name] = value.removeprefix(" ")
                    continue
                if "data" in fields:
                    yield Event(fields.get("event", "message"), fields.get("id"), fields["data"])
                fields = {}

    @contextlib.contextmanager
    def _open(
        self,
        method: str,
        path: str,
        body: Any,
        query: Mapping[str, str | int | None] | None,
        accept: str = "application/json",
    ) -> Iterator[Any]:
        params = {k: str(v) for k, v in (query or {}).items() if v is not None}
        if self.namespace != namespaces.DEFAULT:  # `default` unnamed: the requests of before namespaces
            params.setdefault(namespaces.FIELD, self.namespace)
        url = self.base_url + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Accept": accept, "User-Agent": f"cronos-cli/{__version__}"}
        data = None
        if body is not None:
            data = msgspec.json.encode(body)
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                yield response
        except urllib.error.HTTPError as exc:
            raise _problem(exc.code, exc.read()) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiUnreachable(
                f"cannot reach the API at {self._shown_url()}: {_one_line(str(reason))} (set CRONOS_API_URL)"
            ) from None

    def _shown_url(self) -> str:
        """The base URL without any user-info it may carry."""
        parts = urlsplit(self.base_url)
        host = parts.netloc.rpartition("@")[2]
        return parts._replace(netloc=host).geturl()

    def pages(self, path: str, query: Mapping[str, str | int | None] | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a paged listing, following `next_cursor`."""
        cursor: str | None = None
        while True:
            page = self.call("GET", path, query={**(query or {}), "limit": PAGE, "cursor": cursor})
            yield from page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return
