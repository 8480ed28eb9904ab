"""`http` runs: one signed request carrying the run's identity, so the target can de-duplicate.

Every request goes through the executor's guarded client (`executor.http_client`): refused
addresses are never connected to. Redirects are off unless the job sets follow_redirects;
then they are followed here, hop by hop (each hop guarded), at most CRONOS_HTTP_MAX_REDIRECTS.
The job's secrets go only where they were entered (`cronos.secret_bounds`: the job's own URL's
scheme, host, port and path, and its Host header), asked before the first request (a run whose
inputs would move them fails, nothing sent) and at each hop: a hop elsewhere drops every header
`cronos.redact` hides (by name or by value) and the URL's credentials, for the rest of the chain,
and is refused when it would resend a body holding secrets. `secrets_follow_redirects` lets them
go on to other paths of the origin; a hop to another origin also drops the signature and is
refused when it would resend any body. URLs in run errors are redacted (`cronos.redact.redact_url`).
While traces are on, every request carries the run's W3C `traceparent` (docs/tracing.md).

Each request first takes a place at its origin (`executor.host_limits`: at most the host's limit
in flight, the rest wait in line), kept across redirect hops within the origin; a hop to another
origin takes a place there. Time spent waiting counts against the run's timeout, not the
request's own `timeout_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import aiohttp
import msgspec
from multidict import CIMultiDict
from yarl import URL

from cronos import traces
from cronos.netguard import host_literal_refusal
from cronos.payloads import HttpPayload, explain
from cronos.redact import SECRET, is_hidden, redact_payload, redact_url
from cronos.run_usage import Meter
from cronos.secret_bounds import Place, moved, place_of
from cronos.store.runs import ClaimedRun
from cronos.tasks import Cancellation, idempotency_key
from executor import output, webhooks
from executor.host_limits import HostWaitEnded
from executor.http_client import PREFIX, guard_refusal
from executor.kinds.base import Env, RunFailed, excerpt

REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Headers only the job's own origin gets, besides those cronos.redact hides.
ORIGIN_BOUND = frozenset({"host", "webhook-id", "webhook-timestamp", "webhook-signature"})
# A wait for a host's place gives up this much before the run's timeout (entered just before this
# kind runs) so the run fails with the wait's reason, not a bare "timed out".
WAIT_MARGIN_S = 0.05


def identity_headers(run: ClaimedRun) -> dict[str, str]:
    return {
        "X-Cronos-Job-Id": str(run.job_id),
        "X-Cronos-Run-Id": str(run.id),
        "X-Cronos-Scheduled-For": run.scheduled_for.isoformat(),
        "X-Cronos-Attempt": str(run.attempt),
        "Idempotency-Key": idempotency_key(run.job_id, run.scheduled_for),
    }


def _to_output(response: aiohttp.ClientResponse, method: str, url: str, body: str) -> None:
    """The response as lines of the run's output: its status, its headers (those cronos.redact
    hides shown as SECRET) and the head of its body (the result excerpt's)."""
    lines = output.current()
    if lines is None:
        return
    lines.line("http", f"{method} {redact_url(url)} -> HTTP {response.status} {response.reason or ''}".rstrip())
    for name, value in response.headers.items():
        lines.line("http", f"{name}: {SECRET if is_hidden(name, value) else value}")
    if body:
        lines.write("http", body if body.endswith("\n") else body + "\n")


def status_expected(status: int, expect: list[int] | int | None) -> bool:
    if expect is None:
        return 200 <= status < 300
    if isinstance(expect, int):
        return status == expect
    return status in expect


def check_target(url: URL, allow: Sequence[str]) -> None:
    """Refuse a host that is a refused address literal (in any inet_aton form) before any
    connection, with a clean message; names, localhost too, are judged after resolution."""
    why = host_literal_refusal(url.raw_host or "", allow)
    if why is not None:
        raise RunFailed(PREFIX + why)


def _origin(url: URL) -> tuple[str, str | None, int | None]:
    return url.scheme, url.host, url.port


class Bound(NamedTuple):
    """Where the run's secrets may go (cronos.secret_bounds), and which it has."""

    entered: Place | None  # the job's own URL and Host header, before any run inputs
    any_path: bool  # secrets_follow_redirects
    any_secret: bool
    secret_body: bool
    secret_headers: frozenset[str]  # lower-cased names of the job's headers cronos.redact hides

    @classmethod
    def of(cls, run: ClaimedRun, payload: HttpPayload) -> Bound:
        own = run.job_payload if run.job_payload is not None else run.payload
        url = own.get("url")
        entered = place_of(url, own.get("headers")) if isinstance(url, str) else None
        body: dict[str, Any] = {"body": payload.body}
        return cls(
            entered,
            payload.secrets_follow_redirects,
            redact_payload("http", run.payload) != run.payload,
            redact_payload("http", body) != body,
            frozenset(n.lower() for n, value in payload.headers.items() if is_hidden(n, value)),
        )


def check_first_request(bound: Bound, payload: HttpPayload) -> None:
    """A run whose payload (inputs merged) would take the job's secrets elsewhere sends nothing.
    The API refuses such inputs; this holds whatever got stored."""
    if not bound.any_secret:
        return
    field = moved(bound.entered, place_of(payload.url, payload.headers))
    if field is not None:
        raise RunFailed(
            f"refused: this run's {field} differs from the job's own, and the job's secrets go only where they"
            " were entered (a run's inputs may not move them); nothing was sent"
        )


def _next_hop(
    url: URL, status: int, location: str, method: str, data: bytes | None, headers: CIMultiDict[str], bound: Bound
) -> tuple[URL, str, bytes | None, bool]:
    """Where a redirect leads, with which method and body (as browsers do: 303, and 301/302
    after a POST, become a GET without body), and whether it leaves the origin. A hop where the
    secrets may not go (`bound`) drops the secret headers and URL credentials, and a body holding
    secrets is not resent; leaving the origin drops the signature too, and no body is resent."""
    try:
        target = url.join(URL(location))
    except ValueError:
        raise RunFailed(f"redirect to an invalid URL refused: {redact_url(location)}") from None
    if target.scheme not in ("http", "https"):
        shown = redact_url(str(target))
        raise RunFailed(f"redirect to a {target.scheme or 'schemeless'} URL refused (http and https only): {shown}")
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, data = "GET", None
        for name in ("Content-Type", "Content-Length"):
            headers.popall(name, None)
    left = _origin(target) != _origin(url)
    if not left and moved(bound.entered, place_of(str(target), headers), any_path=bound.any_path) is None:
        return target, method, data, False
    if data and left:  # 307/308 (or 301/302 after a PUT...) repeat the body: it may hold the job's secrets
        raise RunFailed(
            f"redirect {status} to another origin refused: it would send the request body to {method}"
            f" {redact_url(str(target))}; point the job at that URL if it is meant to get it"
        )
    if data and bound.secret_body:
        raise RunFailed(
            f"redirect {status} to another path refused: it would send the request body, which holds the job's"
            f" secrets, to {method} {redact_url(str(target))}; point the job at that URL (entering its secrets"
            " again) or set secrets_follow_redirects"
        )
    # Within the origin only the job's secret headers go; leaving it, also whatever looks like one.
    dropped = {n for n, value in headers.items() if (left and is_hidden(n, value)) or n.lower() in bound.secret_headers}
    for name in dropped | ({n for n in headers if n.lower() in ORIGIN_BOUND} if left else set()):
        headers.popall(name, None)
    return target.with_user(None), method, data, left


async def run(run: ClaimedRun, env: Env, cancellation: Cancellation, meter: Meter) -> str | None:
    """`meter` stays empty: an http run's usage is its wall time (the request is the executor's I/O)."""
    try:
        payload = msgspec.convert(run.payload, HttpPayload)
    except msgspec.ValidationError as exc:
        raise RunFailed(f"invalid http payload: {explain(str(exc))}") from None  # no URL in a traceback
    bound = Bound.of(run, payload)
    check_first_request(bound, payload)
    headers: CIMultiDict[str] = CIMultiDict(payload.headers)
    headers.update(identity_headers(run))
    if (parent := traces.TRACEPARENT.get()) is not None:
        # The run's trace goes on to the service it calls (W3C Trace Context): its spans join the
        # run's. Not a routing header (cronos.secret_bounds): it follows redirects like the ids above.
        headers["traceparent"] = parent
    data: bytes | None = None
    if isinstance(payload.body, str):
        data = payload.body.encode()
    elif payload.body is not None:
        data = msgspec.json.encode(payload.body)
        headers.setdefault("Content-Type", "application/json")
    settings = env.settings
    loop = asyncio.get_running_loop()
    started = loop.time()
    ends = started + run.timeout_s
    give_up_at = ends - min(WAIT_MARGIN_S, run.timeout_s / 10)
    request_s = min(payload.timeout_s or run.timeout_s, run.timeout_s)
    waited = 0.0  # for places at hosts: the request's own timeout does not count it
    msg_id = webhooks.message_id(run.job_id, run.scheduled_for)
    method: str = payload.method
    try:
        url, shown = URL(payload.url), payload.url
    except ValueError:
        raise RunFailed(f"invalid http payload: $.url is not a URL: {redact_url(payload.url)}") from None
    max_bytes = settings.result_max_bytes
    hops = 0
    signed = True  # until the chain leaves the job's origin: the signature is for its receiver only
    async with contextlib.AsyncExitStack() as places:
        at: tuple[str, str | None, int | None] | None = None  # the origin holding this run's place
        while True:
            check_target(url, settings.http_allow_nets)
            if _origin(url) != at:
                await places.aclose()  # the previous origin's place, if any
                try:
                    waited += await places.enter_async_context(
                        env.hosts.place(
                            url.scheme,
                            url.raw_host or "",
                            url.port or 0,
                            payload.host_limit,
                            give_up_at=give_up_at,
                            cancellation=cancellation,
                        )
                    )
                except HostWaitEnded as exc:
                    raise RunFailed(exc.message) from None
                at = _origin(url)
            if signed:
                body = data if data is not None else b""
                headers.update(webhooks.signature_headers(run.webhook_secret, msg_id, int(time.time()), body))
            deadline = min(started + waited + request_s, ends)
            try:
                async with env.http.request(
                    method,
                    url,
                    headers=headers,
                    data=data,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=max(deadline - loop.time(), 0.001)),
                ) as response:
                    status = response.status
                    location = response.headers.get("Location")
                    if payload.follow_redirects and status in REDIRECTS and location:
                        hops += 1
                        if hops > settings.http_max_redirects:
                            raise RunFailed(
                                f"too many redirects: more than {settings.http_max_redirects}"
                                f" (CRONOS_HTTP_MAX_REDIRECTS) from {payload.method} {redact_url(payload.url)}"
                            )
                        url, method, data, left = _next_hop(url, status, location, method, data, headers, bound)
                        signed = signed and not left
                        shown = str(url)
                        continue
                    content = await response.content.read(max_bytes + 1)
                    _to_output(response, method, shown, excerpt(content, max_bytes) or "")
            except aiohttp.ClientError as exc:
                refused = guard_refusal(exc)
                if refused is not None:
                    raise RunFailed(PREFIX + refused.reason) from None  # expected: no traceback noise
                message = str(exc).replace(str(url), redact_url(str(url))).replace(shown, redact_url(shown))
                # Not chained: the cause's text (in the stored traceback) may hold the URL unredacted.
                raise RunFailed(f"http request failed: {type(exc).__name__}: {message}") from None
            break
    result = f"HTTP {status}\n{excerpt(content, max_bytes)}"
    if not status_expected(status, payload.expect_status):
        raise RunFailed(f"unexpected HTTP status {status} from {method} {redact_url(shown)}", result=result)
    return result
