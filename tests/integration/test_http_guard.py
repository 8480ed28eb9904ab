"""http runs through the SSRF guard and signed per Standard Webhooks, with a real executor
and a real receiver on loopback (the tests' settings allow 127.0.0.0/8; some tests allow nothing)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from standardwebhooks import Webhook

from cronos.settings import Settings
from executor.http_client import GuardedResolver, guard_refusal, guarded_session, guarded_socket_factory
from executor.service import Executor
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness

TAIL = "; allow it with CRONOS_HTTP_ALLOW_NETS"


class Receiver:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []  # method, path, headers, body
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def paths(self) -> list[str]:
        return [path for _, path, _, _ in self.requests]


async def _serve(host: str, found: Receiver) -> web.AppRunner:
    async def handle(request: web.Request) -> web.StreamResponse:
        found.requests.append((request.method, request.path_qs, dict(request.headers), await request.read()))
        if request.path == "/to" and "location" in request.query:  # /to?status=302&location=...
            raise _redirect(int(request.query.get("status", "302")), request.query["location"])
        if request.path == "/loop":
            raise _redirect(302, "/loop")
        if request.path == "/fail":
            return web.Response(status=503, text="down")
        return web.Response(status=200, text="ok")

    runner, found.port = await serve(handle, host)
    return runner


def _redirect(status: int, location: str) -> web.HTTPException:
    kinds: dict[int, type[web.HTTPException]] = {
        301: web.HTTPMovedPermanently,
        302: web.HTTPFound,
        303: web.HTTPSeeOther,
        307: web.HTTPTemporaryRedirect,
        308: web.HTTPPermanentRedirect,
    }
    return kinds[status](location)  # type: ignore[call-arg]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    runner = await _serve("127.0.0.1", found)
    try:
        yield found
    finally:
        await runner.cleanup()


async def _secret(harness: Harness, job: int) -> str:
    return str(await harness.pool.fetchval("SELECT webhook_secret FROM jobs WHERE id = $1", job))


async def _run(harness: Harness, settings: Settings, payload: dict[str, Any], **job: Any) -> tuple[int, Any]:
    job_id = await harness.job(kind="http", payload=payload, **job)
    await harness.queue(job_id)
    async with Executor(settings) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job_id)
    return job_id, run


# --- signatures ------------------------------------------------------------------------


async def test_request_is_signed_with_the_jobs_secret(harness: Harness, settings: Settings, receiver: Receiver) -> None:
    job, run = await _run(harness, settings, {"url": f"{receiver.url}/hook", "body": {"a": 1}})
    assert run.state == "completed"
    ((method, path, headers, body),) = receiver.requests
    assert (method, path) == ("POST", "/hook")
    secret = await _secret(harness, job)
    assert secret.startswith("whsec_")
    assert Webhook(secret).verify(body, headers) == {"a": 1}
    assert headers["webhook-id"] == f"msg_{job}_1893456000000"  # the tick, as Idempotency-Key
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60


async def test_a_get_signs_its_empty_body_and_a_wrong_secret_fails(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    job, run = await _run(harness, settings, {"url": f"{receiver.url}/get", "method": "GET"})
    assert run.state == "completed"
    ((_, _, headers, body),) = receiver.requests
    assert body == b""
    Webhook(await _secret(harness, job)).verify(body, headers, json_parse=False)
    other = await harness.job(kind="http", payload={"url": receiver.url})  # another job, another secret
    with pytest.raises(Exception, match="No matching signature"):
        Webhook(await _secret(harness, other)).verify(body, headers, json_parse=False)


# --- the guard ---------------------------------------------------------------------------


async def test_loopback_name_refused_after_resolution(harness: Harness, settings: Settings, receiver: Receiver) -> None:
    closed = msgspec.structs.replace(settings, http_allow_nets=())
    _, run = await _run(harness, closed, {"url": f"http://localhost:{receiver.port}/hook"})
    assert run.state == "failed"
    assert run.error == f"refused by the SSRF guard: localhost -> 127.0.0.1 is loopback (127.0.0.0/8){TAIL}"
    assert receiver.requests == []
    assert "aiohttp" not in (run.traceback or "")  # an expected failure: no chained client error


async def test_loopback_name_allowed_by_the_allow_list(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    _, run = await _run(harness, settings, {"url": f"http://localhost:{receiver.port}/hook"})
    assert run.state == "completed" and receiver.paths() == ["/hook"]


@pytest.mark.parametrize(
    ("host", "shown"),
    [("127.0.0.1", "127.0.0.1"), ("2130706433", "2130706433 (= 127.0.0.1)"), ("0177.0.0.1", "0177.0.0.1 (= 127.0.0.1)"),
     ("0x7f.1", "0x7f.1 (= 127.0.0.1)"), ("[::ffff:127.0.0.1]", "::ffff:7f00:1")],
)  # fmt: skip
async def test_loopback_literals_refused(
    harness: Harness, settings: Settings, receiver: Receiver, host: str, shown: str
) -> None:
    closed = msgspec.structs.replace(settings, http_allow_nets=())
    _, run = await _run(harness, closed, {"url": f"http://{host}:{receiver.port}/hook"})
    assert run.state == "failed" and run.error is not None
    assert run.error.startswith(f"refused by the SSRF guard: {shown} is "), run.error
    assert "loopback (127.0.0.0/8)" in run.error and run.error.endswith(TAIL)
    assert receiver.requests == []


@pytest.mark.parametrize("host", ["[::ffff:127.0.0.1]", "[::ffff:7f00:1]"])
async def test_an_ipv6_allow_list_does_not_open_ipv4_loopback(
    harness: Harness, settings: Settings, receiver: Receiver, host: str
) -> None:
    """Issue 22 item 8: `::/0` allowed every IPv6 address, IPv4-mapped ones too, so the receiver
    on 127.0.0.1 was reached through [::ffff:127.0.0.1]. The IPv4 inside is judged as IPv4."""
    open_v6 = msgspec.structs.replace(settings, http_allow_nets=("192.0.2.0/24", "::/0"))
    _, run = await _run(harness, open_v6, {"url": f"http://{host}:{receiver.port}/hook"})
    assert run.state == "failed" and run.error is not None
    assert run.error.startswith("refused by the SSRF guard: "), run.error
    assert "IPv4-mapped (::ffff:0:0/96) for 127.0.0.1, which is loopback (127.0.0.0/8)" in run.error
    assert receiver.requests == []


async def test_the_session_under_an_ipv6_allow_list_refuses_a_mapped_loopback(receiver: Receiver) -> None:
    """The connect-time check alone (the kind's literal check left out): the socket factory."""
    async with guarded_session(("::/0",)) as session:
        with pytest.raises(aiohttp.ClientError) as caught:
            await session.get(f"http://[::ffff:127.0.0.1]:{receiver.port}/")
        refused = guard_refusal(caught.value)
        assert refused is not None and "for 127.0.0.1, which is loopback (127.0.0.0/8)" in refused.reason
    assert receiver.requests == []


async def test_the_session_itself_connects_only_to_allowed_addresses(receiver: Receiver) -> None:
    """Without the kind's literal check: the resolver (names) and the socket factory (literals)."""
    async with guarded_session(()) as session:
        for url in (f"http://localhost:{receiver.port}/", f"{receiver.url}/"):
            with pytest.raises(aiohttp.ClientError) as caught:
                await session.get(url)
            refused = guard_refusal(caught.value)
            assert refused is not None and "is loopback (127.0.0.0/8)" in refused.reason
    assert receiver.requests == []


class _MappedHosts(AbstractResolver):
    """A hosts file of one line: every name is ::ffff:127.0.0.1 (DNS answering an IPv4-mapped address)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        mapped = "::ffff:127.0.0.1"
        return [ResolveResult(hostname=host, host=mapped, port=port, family=socket.AF_INET6, proto=0, flags=0)]

    async def close(self) -> None:
        pass


@pytest.mark.parametrize(("allow", "reached"), [(("::/0",), False), (("127.0.0.0/8",), True)])
async def test_a_name_resolving_to_a_mapped_loopback_is_judged_as_ipv4(
    receiver: Receiver, allow: tuple[str, ...], reached: bool
) -> None:
    """The resolver's check: `::/0` does not let a name that resolves to ::ffff:127.0.0.1 through;
    127.0.0.0/8 does (the control: that address does reach the receiver)."""
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(allow, _MappedHosts()), socket_factory=guarded_socket_factory(allow)
    )
    async with aiohttp.ClientSession(connector=connector) as session:
        url = f"http://mapped.example:{receiver.port}/"
        if reached:
            async with session.get(url) as response:
                assert response.status == 200
        else:
            with pytest.raises(aiohttp.ClientError) as caught:
                await session.get(url)
            refused = guard_refusal(caught.value)
            assert refused is not None and refused.reason.startswith(
                "mapped.example -> ::ffff:7f00:1 is IPv4-mapped (::ffff:0:0/96) for 127.0.0.1, which is loopback"
            ), refused.reason
    assert receiver.paths() == (["/"] if reached else [])


# --- redirects -----------------------------------------------------------------------------


async def test_redirects_are_off_by_default(harness: Harness, settings: Settings, receiver: Receiver) -> None:
    _, run = await _run(harness, settings, {"url": f"{receiver.url}/to?location=/ok"})
    assert run.state == "failed" and run.error == f"unexpected HTTP status 302 from POST {receiver.url}/to?location=/ok"
    assert run.result is not None and run.result.startswith("HTTP 302\n")
    assert receiver.paths() == ["/to?location=/ok"]


async def test_redirect_to_a_refused_address_fails_before_connecting(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    started = time.monotonic()
    payload = {"url": f"{receiver.url}/to?location=http://10.255.255.1:81/x", "follow_redirects": True}
    _, run = await _run(harness, settings, payload, timeout_s=20)
    assert run.state == "failed"
    assert run.error == f"refused by the SSRF guard: 10.255.255.1 is private (10.0.0.0/8){TAIL}"
    assert time.monotonic() - started < 5  # a connection to a black hole would wait out the 20 s timeout


async def test_redirect_to_ipv6_loopback_never_reaches_it(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    behind = Receiver()
    try:
        runner = await _serve("::1", behind)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        payload = {"url": f"{receiver.url}/to?location=http://[::1]:{behind.port}/secret", "follow_redirects": True}
        _, run = await _run(harness, settings, payload)
    finally:
        await runner.cleanup()
    assert run.state == "failed" and run.error == f"refused by the SSRF guard: ::1 is loopback (::1/128){TAIL}"
    assert behind.requests == []


async def test_each_hop_is_signed_and_post_302_becomes_get(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    payload = {
        "url": f"{receiver.url}/to?location=/ok",
        "body": {"a": 1},
        "follow_redirects": True,
        "headers": {"Authorization": "Bearer s3cret"},
    }
    job, run = await _run(harness, settings, payload)
    assert run.state == "completed"
    (first, second) = receiver.requests
    assert (first[0], second[0], second[1], second[3]) == ("POST", "GET", "/ok", b"")
    webhook = Webhook(await _secret(harness, job))
    webhook.verify(first[3], first[2])
    webhook.verify(second[3], second[2], json_parse=False)
    assert first[2]["webhook-id"] == second[2]["webhook-id"]  # same origin: signed, the same message
    assert first[2]["Authorization"] == "Bearer s3cret" and "Authorization" not in second[2]  # another path


async def test_307_on_the_same_origin_keeps_method_body_secrets_and_signature_when_the_job_says(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    payload = {
        "url": f"{receiver.url}/to?status=307&location=/ok",
        "body": {"password": "pa55word-1"},
        "follow_redirects": True,
        "secrets_follow_redirects": True,
        "headers": {"Authorization": "Bearer s3cret", "X-Hook": "Bearer h00k"},
    }
    job, run = await _run(harness, settings, payload)
    assert run.state == "completed"
    (_, second) = receiver.requests
    assert second[0] == "POST" and msgspec.json.decode(second[3]) == {"password": "pa55word-1"}
    assert second[2]["Authorization"] == "Bearer s3cret" and second[2]["X-Hook"] == "Bearer h00k"
    Webhook(await _secret(harness, job)).verify(second[3], second[2])


async def test_a_hop_to_another_path_carries_no_secret(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    """Issue 36 (LOW): secrets followed a same-origin 307 to another path. Now the job's secret
    headers and its URL's credentials stay with the path they were entered for; the rest of the
    request (a body without secrets, the signature) goes on, and a hop back to the path keeps
    them, while the same path under another query keeps them."""
    base = receiver.url.replace("http://", "http://bob:pa55-user@")
    payload = {
        "url": f"{base}/to?status=307&location=/landing",
        "body": {"n": 1},
        "follow_redirects": True,
        # Authorization comes from the URL's credentials (aiohttp refuses both).
        "headers": {**{k: v for k, v in SECRET_HEADERS.items() if k != "Authorization"},
                    "Host": f"127.0.0.1:{receiver.port}"},
    }  # fmt: skip
    job, run = await _run(harness, settings, payload)
    assert run.state == "completed", run.error
    (first, second) = receiver.requests
    assert all(name in first[2] for name in ("Authorization", "X-Api-Key", "X-Hook", "Cookie"))
    assert first[2]["Authorization"].startswith("Basic ")
    assert (second[0], second[1], second[3]) == ("POST", "/landing", b'{"n":1}')
    assert [name for name in ORIGIN_BOUND if name in second[2]] == ["webhook-id", "webhook-timestamp",
                                                                      "webhook-signature"]  # fmt: skip
    assert not any(secret in str(second) for secret in ("s3cret", "k3y-value", "h00k-value", "c00kie", "pa55"))
    assert second[2]["X-Plain"] == "plain"
    Webhook(await _secret(harness, job)).verify(second[3], second[2])


async def test_a_hop_to_the_same_path_keeps_the_secrets(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    payload = {"url": f"{receiver.url}/to?status=307&location=/to%3Fstatus%3D200", "follow_redirects": True,
               "headers": SECRET_HEADERS, "body": {"password": "pa55word-1"}}  # fmt: skip
    _, run = await _run(harness, settings, payload)
    assert run.state == "completed", run.error
    (_, second) = receiver.requests
    assert second[1] == "/to?status=200" and second[2]["Authorization"] == "Bearer s3cret"
    assert msgspec.json.decode(second[3]) == {"password": "pa55word-1"}


async def test_a_hop_to_another_path_never_resends_a_body_holding_secrets(
    harness: Harness, settings: Settings, receiver: Receiver
) -> None:
    payload = {"url": f"{receiver.url}/to?status=307&location=/landing", "follow_redirects": True,
               "body": {"password": "pa55word-1"}}  # fmt: skip
    _, run = await _run(harness, settings, payload)
    assert run.state == "failed" and receiver.paths() == ["/to?status=307&location=/landing"]
    assert run.error == (
        "redirect 307 to another path refused: it would send the request body, which holds the job's secrets, to"
        f" POST {receiver.url}/landing; point the job at that URL (entering its secrets again) or set"
        " secrets_follow_redirects"
    )


@pytest.fixture
async def elsewhere() -> AsyncIterator[Receiver]:
    """Another origin: the same address, another port."""
    found = Receiver()
    runner = await _serve("127.0.0.1", found)
    try:
        yield found
    finally:
        await runner.cleanup()


SECRET_HEADERS = {"Authorization": "Bearer s3cret", "X-Api-Key": "k3y-value", "X-Hook": "Bearer h00k-value",
                  "Cookie": "sid=c00kie", "X-Plain": "plain"}  # fmt: skip
ORIGIN_BOUND = (
    "Authorization",
    "X-Api-Key",
    "X-Hook",
    "Cookie",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
)


@pytest.mark.parametrize(("status", "method"), [(302, "GET"), (307, "GET"), (308, "DELETE"), (303, "POST")])
async def test_a_cross_origin_hop_carries_no_secret_and_no_signature(
    harness: Harness, settings: Settings, receiver: Receiver, elsewhere: Receiver, status: int, method: str
) -> None:
    """Every header hidden by name or by value, and the signature, stay with their origin (issue 22, item 9)."""
    payload = {
        "url": f"{receiver.url}/to?status={status}&location={elsewhere.url}/landing",
        "method": method,
        "follow_redirects": True,
        "headers": SECRET_HEADERS,
    }
    if method == "POST":
        payload["body"] = {"password": "pa55word-1"}  # a 303 makes it a GET without its body
    _, run = await _run(harness, settings, payload)
    assert run.state == "completed", run.error
    ((_, _, first, _),) = receiver.requests
    assert all(name in first for name in ORIGIN_BOUND)  # the first hop had them all
    ((got_method, path, headers, body),) = elsewhere.requests
    assert (got_method, path, body) == ("GET" if status == 303 else method, "/landing", b"")
    assert [name for name in ORIGIN_BOUND if name in headers] == []
    assert headers["X-Plain"] == "plain" and headers["X-Cronos-Job-Id"]  # the rest of the request as it was
    assert not any(secret in str(headers) for secret in ("s3cret", "k3y-value", "h00k-value", "c00kie", "pa55"))


@pytest.mark.parametrize("status", [307, 308])
async def test_a_cross_origin_hop_never_resends_the_body(
    harness: Harness, settings: Settings, receiver: Receiver, elsewhere: Receiver, status: int
) -> None:
    """307/308 would repeat the request with its body: refused across origins, nothing sent there."""
    payload = {
        "url": f"{receiver.url}/to?status={status}&location={elsewhere.url}/landing?token=t0k3n-1",
        "body": {"password": "pa55word-1"},
        "follow_redirects": True,
    }
    _, run = await _run(harness, settings, payload)
    assert elsewhere.requests == []
    assert run.state == "failed"
    assert run.error == (
        f"redirect {status} to another origin refused: it would send the request body to POST"
        f" {elsewhere.url}/landing?token=***; point the job at that URL if it is meant to get it"
    )


async def test_secrets_dropped_at_a_cross_origin_hop_do_not_come_back(
    harness: Harness, settings: Settings, receiver: Receiver, elsewhere: Receiver
) -> None:
    back = f"{receiver.url}/again"
    payload = {
        "url": f"{receiver.url}/to?location={elsewhere.url}/to%3Flocation%3D{back}",
        "method": "GET",
        "follow_redirects": True,
        "headers": SECRET_HEADERS,
    }
    _, run = await _run(harness, settings, payload)
    assert run.state == "completed", run.error
    assert receiver.paths()[-1] == "/again"
    assert [name for name in ORIGIN_BOUND if name in receiver.requests[-1][2]] == []


async def test_redirect_hops_are_capped(harness: Harness, settings: Settings, receiver: Receiver) -> None:
    capped = msgspec.structs.replace(settings, http_max_redirects=2)
    _, run = await _run(harness, capped, {"url": f"{receiver.url}/loop", "follow_redirects": True})
    assert run.state == "failed"
    assert run.error == f"too many redirects: more than 2 (CRONOS_HTTP_MAX_REDIRECTS) from POST {receiver.url}/loop"
    assert receiver.paths() == ["/loop"] * 3


async def test_urls_in_run_errors_are_redacted(harness: Harness, settings: Settings, receiver: Receiver) -> None:
    _, run = await _run(harness, settings, {"url": f"{receiver.url}/fail?token=abc&page=2"})
    assert run.error == f"unexpected HTTP status 503 from POST {receiver.url}/fail?token=***&page=2"


async def test_a_literal_no_one_can_read_is_refused(harness: Harness, settings: Settings) -> None:
    """The payload's URL pattern refuses it (a job stored before the API checked it): no regex in the error."""
    _, run = await _run(harness, settings, {"url": "http://[1:2:3]/?token=abc"})
    assert run.error is not None and run.error.startswith("invalid http payload: must be an http:// or https:// URL")
    assert run.error.endswith("- at `$.url`") and "abc" not in run.error
    assert "abc" not in (run.traceback or "")


async def test_nothing_left_listening_is_a_plain_failure(harness: Harness, settings: Settings) -> None:
    """An allowed address that refuses the connection is a network failure, not a guard refusal."""
    closed_port = await _free_port()
    _, run = await _run(harness, settings, {"url": f"http://127.0.0.1:{closed_port}/?secret=x"})
    assert run.state == "failed" and run.error is not None
    assert run.error.startswith("http request failed: ClientConnectorError") and "SSRF" not in run.error
    assert "secret=x" not in (run.error + (run.traceback or ""))


async def _free_port() -> int:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()
    return port
