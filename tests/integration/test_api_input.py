"""Every bad input is a clean 4xx problem body naming what is wrong, and secrets never come back
(issue 11, items 6 and 7), against a real API, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import msgspec
import pytest

from api import bodies as api_bodies
from cronos.settings import Settings
from tests.integration.api_client import SEED_JOB, Api, running_api

JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


def _problem(reply: Any, status: int, field: str | None = None) -> None:
    assert reply.status == status, reply.body
    assert reply.headers["Content-Type"].startswith("application/problem+json")
    assert reply.body["status"] == status
    if field is not None:
        assert reply.body["field"] == field, reply.body
        assert field in reply.body["detail"]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_deep_nesting_is_422_naming_the_field(api: Api, pg_pool: asyncpg.Pool) -> None:
    for depth in (33, 200, 1000, 100_000):  # 1000 deep was a RecursionError -> 500
        deep = _nested(depth)
        raw = f'{{"name": "a", "cron_expression": "* * * * *", "payload": {{"action": "x", "deep": {deep}}}}}'
        reply = await api.call("POST", "/api/jobs", data=raw, headers=JSON)
        _problem(reply, 422)
        assert reply.body["field"].startswith("$.payload"), (depth, reply.body)
        assert "nested deeper than 32 levels" in reply.body["detail"]
    job = await api.create()
    raw = f'{{"payload": {{"action": "x", "deep": {_nested(1000)}}}}}'
    _problem(await api.call("PATCH", f"/api/jobs/{job['id']}", data=raw, headers=JSON), 422, "$.payload")
    ok = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"payload": {"action": "x", "d": [[[[1]]]]}})
    assert ok.status == 200
    assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 1


async def test_huge_ids_limits_and_cursors(api: Api) -> None:
    digits = "9" * 5000  # int() refuses more than 4,300 digits: was a 500
    for method, path in (("GET", f"/api/jobs/{digits}"), ("GET", f"/api/runs/{digits}"),
                         ("GET", f"/api/jobs/{digits}/runs"), ("POST", f"/api/jobs/{digits}/trigger"),
                         ("DELETE", f"/api/jobs/{digits}"), ("GET", "/api/jobs/" + "0" * 5000 + "1"),
                         ("GET", "/api/jobs/9223372036854775808")):  # fmt: skip
        reply = await api.call(method, path)
        _problem(reply, 404)
        assert len(reply.body["detail"]) < 200
    _problem(await api.call("GET", f"/api/jobs?limit={digits}"), 422, "limit")
    job = await api.create()
    _problem(await api.call("GET", f"/api/jobs/{job['id']}/runs?limit={digits}"), 422, "limit")
    for text in ("id:9223372036854775808", "id:" + "9" * 30, "id:1e3", "x" * 100):
        cursor = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
        for path in ("/api/jobs", f"/api/jobs/{job['id']}/runs"):
            reply = await api.call("GET", f"{path}?cursor={cursor}")
            _problem(reply, 422, "cursor")  # was an asyncpg DataError -> 500
            assert "not a cursor returned by this API" in reply.body["detail"]
    top = base64.urlsafe_b64encode(b"id:9223372036854775807").decode().rstrip("=")
    assert (await api.call("GET", f"/api/jobs?cursor={top}")).status == 200


CRON = [
    ("- * * * * *", "second field '-'"),
    ("0 - 5 * * *", "minute field '-'"),
    ("1,,2 * * * *", "empty list item"),
    ("*/99999999999999999999 * * * *", "is too large (at most 999)"),
]


async def test_cron_parser_gaps_are_422(api: Api, pg_pool: asyncpg.Pool) -> None:
    for expression, says in CRON:
        reply = await api.call("POST", "/api/jobs", json={**SEED_JOB, "cron_expression": expression})
        _problem(reply, 422, "$.cron_expression")
        assert says in reply.body["detail"]
    assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 0


async def test_a_job_names_its_queue_default_by_default(api: Api, pg_pool: asyncpg.Pool) -> None:
    created = await api.call("POST", "/api/jobs", json=SEED_JOB)
    assert created.status == 201 and created.body["queue"] == "default"
    for bad in ("", "a b", "gpu:1", "x" * 65, "ü", 7):
        reply = await api.call("POST", "/api/jobs", json={**SEED_JOB, "name": "other", "queue": bad})
        _problem(reply, 422, "$.queue")
        reply = await api.call("PATCH", f"/api/jobs/{created.body['id']}", json={"queue": bad})
        _problem(reply, 422, "$.queue")
    moved = await api.call("PATCH", f"/api/jobs/{created.body['id']}", json={"queue": "gpu-2_b"})
    assert moved.status == 200 and moved.body["queue"] == "gpu-2_b"
    assert await pg_pool.fetchval("SELECT array_agg(queue) FROM jobs") == ["gpu-2_b"]


async def test_bodies_must_be_json(api: Api, pg_pool: asyncpg.Pool) -> None:
    body = '{"name": "a", "cron_expression": "* * * * *", "payload": {"action": "x"}}'
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                  "application/json; charset=latin-1", "application/jsonp", None):  # fmt: skip
        headers: dict[str, str] = {} if ctype is None else {"Content-Type": ctype}
        reply = await api.call("POST", "/api/jobs", data=body.encode(), headers=headers)
        _problem(reply, 415)
        assert "application/json" in reply.body["detail"]
    job = await api.create()
    for path in (f"/api/jobs/{job['id']}/trigger", f"/api/jobs/{job['id']}/pause"):
        _problem(await api.call("POST", path, data=b"x=1", headers={"Content-Type": "text/plain"}), 415)
    _problem(await api.call("PATCH", f"/api/jobs/{job['id']}", data=b'{"max_retries": 1}',
                            headers={"Content-Type": "text/plain"}), 415)  # fmt: skip
    assert await pg_pool.fetchval("SELECT count(*) FROM runs") == 0
    # No body needs no type; a JSON type with a charset is fine.
    assert (await api.call("POST", f"/api/jobs/{job['id']}/trigger")).status == 202
    assert (await api.call("POST", f"/api/jobs/{job['id']}/pause", data=b"")).status == 200
    reply = await api.call("POST", "/api/jobs", data=body, headers={"Content-Type": "Application/JSON; charset=UTF-8"})
    assert reply.status == 201, reply.body


async def test_a_slow_body_is_408(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_bodies, "BODY_READ_S", 0.3)
    released = asyncio.Event()

    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"name": "slow",'
        await released.wait()  # the rest never comes while the server waits
        yield b'"cron_expression": "* * * * *", "payload": {"action": "x"}}'

    try:
        async with asyncio.timeout(10), api.session.post(f"{api.base}/api/jobs", data=trickle(), headers=JSON) as resp:
            status, body, connection = resp.status, await resp.json(content_type=None), resp.headers.get("Connection")
    finally:
        released.set()
    assert status == 408 and body["status"] == 408, body
    assert "did not arrive within 0.3 s" in body["detail"]
    assert (connection or "").lower() == "close"


HTTP = {"url": "https://example.com/hook"}
BAD_PAYLOADS: list[tuple[str, str, dict[str, Any], str]] = [
    ("CRLF in a header value", "http", {**HTTP, "headers": {"X-A": "a\r\nX-Injected: 1"}}, "$.payload.headers.X-A"),
    ("LF at the end of a value", "http", {**HTTP, "headers": {"X-A": "a\n"}}, "$.payload.headers.X-A"),
    ("NUL in a header value", "http", {**HTTP, "headers": {"X-A": "a\x00"}}, "$.payload.headers.X-A"),
    ("CR in a header name", "http", {**HTTP, "headers": {"X-A\r\nB": "a"}}, "$.payload.headers"),
    ("empty header name", "http", {**HTTP, "headers": {"": "a"}}, "$.payload.headers"),
    ("whitespace header name", "http", {**HTTP, "headers": {"  ": "a"}}, "$.payload.headers"),
    ("framing header", "http", {**HTTP, "headers": {"Transfer-Encoding": "chunked"}},
     "$.payload.headers.Transfer-Encoding"),
    ("no host", "http", {"url": "http:///x"}, "$.payload.url"),
    ("only a port", "http", {"url": "http://:80/"}, "$.payload.url"),
    ("user-info, no host", "http", {"url": "http://user@/x"}, "$.payload.url"),
    ("port out of range", "http", {"url": "http://example.com:99999/"}, "$.payload.url"),
    ("ftp", "http", {"url": "ftp://example.com/"}, "$.payload.url"),
    ("backslash", "http", {"url": "http://example.com\\@evil.com/"}, "$.payload.url"),
    ("metadata address", "http", {"url": "http://169.254.169.254/latest/meta-data/"}, "$.payload.url"),
    ("decimal address", "http", {"url": "http://2852039166/"}, "$.payload.url"),
    ("loopback v6", "http", {"url": "http://[::1]:6379/"}, "$.payload.url"),
    ("localhost", "http", {"url": "http://localhost:5432/"}, "$.payload.url"),
    ("PATH", "shell", {"argv": ["true"], "env": {"PATH": "/tmp"}}, "$.payload.env.PATH"),
    ("LD_PRELOAD", "shell", {"argv": ["true"], "env": {"LD_PRELOAD": "/tmp/x.so"}}, "$.payload.env.LD_PRELOAD"),
    ("PYTHONPATH", "shell", {"argv": ["true"], "env": {"PYTHONPATH": "/tmp"}}, "$.payload.env.PYTHONPATH"),
    ("= in an env name", "shell", {"argv": ["true"], "env": {"A=B": "x"}}, "$.payload.env"),
    ("NUL in an env name", "shell", {"argv": ["true"], "env": {"A\x00": "x"}}, "$.payload.env"),
]  # fmt: skip


async def test_bad_payloads_are_422_naming_the_field(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    # Shell allowed, to reach its payload checks; no allow-listed network, as in production.
    production = msgspec.structs.replace(settings, allow_shell=True, http_allow_nets=())
    async with running_api(production) as client:
        for case, kind, payload, field in BAD_PAYLOADS:
            reply = await client.call("POST", "/api/jobs", json={**SEED_JOB, "kind": kind, "payload": payload})
            assert reply.status == 422, (case, reply.body)
            _problem(reply, 422, field)
            assert "X-Injected" not in reply.body["detail"], case
    assert await pg_pool.fetchval("SELECT count(*) FROM jobs") == 0


async def test_shell_jobs_need_the_cluster_to_allow_them(api: Api) -> None:
    reply = await api.call("POST", "/api/jobs", json={**SEED_JOB, "kind": "shell", "payload": {"argv": ["true"]}})
    _problem(reply, 422, "$.kind")
    assert "CRONOS_ALLOW_SHELL=1" in reply.body["detail"] and "admin" in reply.body["detail"]


async def test_payloads_are_bounded(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    async with running_api(msgspec.structs.replace(settings, job_payload_max_bytes=4096)) as client:
        big = {"action": "x", "blob": "y" * 5000}
        reply = await client.call("POST", "/api/jobs", json={**SEED_JOB, "payload": big})
        _problem(reply, 422, "$.payload")
        assert "CRONOS_JOB_PAYLOAD_MAX_BYTES" in reply.body["detail"]
        job = await client.create()
        reply = await client.call("PATCH", f"/api/jobs/{job['id']}", json={"payload": big})
        _problem(reply, 422, "$.payload")
    assert await pg_pool.fetchval("SELECT payload FROM jobs") == {"action": "reindex"}


SECRET_HTTP = {
    "url": "https://bob:hunter2@example.com/hook?token=t0ps3cret&page=2",
    "method": "POST",
    "headers": {"Authorization": "Bearer abc.def", "X-Api-Key": "k3y-value", "Accept": "application/json"},
    "body": {"password": "pa55", "n": 1},
}
SHOWN = {
    "url": "https://bob:***@example.com/hook?token=***&page=2",
    "method": "POST",
    "headers": {"Authorization": "***", "X-Api-Key": "***", "Accept": "application/json"},
    "body": {"password": "***", "n": 1},
}
LEAKS = ("hunter2", "t0ps3cret", "abc.def", "k3y-value", "pa55")


async def test_secrets_are_write_only(api: Api, pg_pool: asyncpg.Pool) -> None:
    created = await api.call("POST", "/api/jobs", json={**SEED_JOB, "kind": "http", "payload": SECRET_HTTP})
    assert created.status == 201 and created.body["payload"] == SHOWN
    job_id = created.body["id"]
    replies = [
        await api.call("GET", f"/api/jobs/{job_id}"),
        await api.call("GET", "/api/jobs"),
        await api.call("PATCH", f"/api/jobs/{job_id}", json={"payload": SHOWN, "max_retries": 1}),
        await api.call("POST", f"/api/jobs/{job_id}/pause"),
        await api.call("PATCH", f"/api/jobs/{job_id}/toggle"),
        # an error quoting the payload: still no secret
        await api.call("PATCH", f"/api/jobs/{job_id}", json={"payload": {**SECRET_HTTP, "method": "BREW"}}),
        await api.call("PATCH", f"/api/jobs/{job_id}", json={"payload": {**SHOWN, "url": "https://evil.example/"}}),
    ]
    for reply in replies:
        text = str(reply.body)
        assert not any(leak in text for leak in LEAKS), text
    assert replies[0].body["payload"] == SHOWN and replies[1].body["items"][0]["payload"] == SHOWN
    assert replies[2].status == 200 and replies[2].body["payload"] == SHOWN
    _problem(replies[6], 422, "$.payload.url")  # *** is not sent to another host: the field that moved it
    # The PATCH that sent *** back kept every stored value.
    stored = await pg_pool.fetchval("SELECT payload::text FROM jobs WHERE id = $1", job_id)
    assert all(leak in stored for leak in LEAKS)


PAST_9999 = "9999-12-31T23:59:59-14:00"  # year 10000 in UTC
BEFORE_1 = "0001-01-01T00:00:00+14:00"  # year 0 in UTC


async def test_instants_outside_the_stored_range_are_422_naming_the_field(api: Api) -> None:
    for field, value in (("run_at", PAST_9999), ("start_at", BEFORE_1), ("end_at", PAST_9999)):
        body = {**SEED_JOB, field: value} | ({"cron_expression": None} if field == "run_at" else {})
        _problem(await api.call("POST", "/api/jobs", json=body), 422, f"$.{field}")
    job = await api.create()
    for field in ("run_at", "start_at", "end_at"):
        _problem(await api.call("PATCH", f"/api/jobs/{job['id']}", json={field: BEFORE_1}), 422, f"$.{field}")
    token = {"name": "t", "scopes": ["read"], "expires_at": PAST_9999}
    _problem(await api.call("POST", "/api/tokens", json=token), 422, "$.expires_at")
    for name, value in (("from", BEFORE_1), ("to", PAST_9999)):
        reply = await api.call("GET", f"/api/jobs/{job['id']}/ticks?{name}={value.replace('+', '%2B')}")
        _problem(reply, 422, name)
    # Inside the edges (cronos.instants): PostgreSQL gives it back exactly, with its offset.
    edge = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"end_at": "9998-12-31T23:59:59.999999+14:00"})
    assert edge.status == 200 and edge.body["end_at"] == "9998-12-31T09:59:59.999999Z", edge.body


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("   ", "blank"),
        ("\u3000 \u200b\u00a0", "blank"),
        ("invoice\u202egpj.exe", "bidirectional"),
        ("a\u2066b", "bidirectional"),
        ("a\u200fb", "bidirectional"),
        ("a\u061cb", "bidirectional"),
        ("bell\u0007", "control"),
        ("line\nbreak", "control"),
    ],
)
async def test_blank_bidi_and_control_names_are_422(api: Api, name: str, why: str) -> None:
    _problem(await api.call("POST", "/api/jobs", json={**SEED_JOB, "name": name}), 422, "$.name")
    job = await api.create()
    refused = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"name": name})
    _problem(refused, 422, "$.name")
    assert why in refused.body["detail"]


async def test_names_are_nfc_so_an_nfd_twin_is_a_conflict(api: Api) -> None:
    nfd = "Cafe\u0301 reports"
    made = await api.create(name=nfd)
    assert made["name"] == "Caf\u00e9 reports"  # stored and shown as NFC
    twin = await api.call("POST", "/api/jobs", json={**SEED_JOB, "name": "Caf\u00e9 reports"})
    assert twin.status == 409, twin.body
    other = await api.create(name="other")
    renamed = await api.call("PATCH", f"/api/jobs/{other['id']}", json={"name": nfd})
    assert renamed.status == 409, renamed.body


async def test_json_responses_are_neither_sniffed_nor_cached(api: Api) -> None:
    replies = [
        await api.call("GET", "/health"),
        await api.call("GET", "/openapi.json"),
        await api.call("POST", "/api/jobs", json=SEED_JOB),  # 201
        await api.call("GET", "/api/jobs"),
        await api.call("GET", "/api/jobs/999"),  # a problem body
        await api.call("POST", "/api/jobs", json={"name": ""}),  # a 422 problem body
        await api.call("GET", "/api/jobs", headers={"Host": "evil.example"}),  # auth's 403 problem body
    ]
    assert [r.status for r in replies] == [200, 200, 201, 200, 404, 422, 403]
    for reply in replies:
        assert reply.headers["X-Content-Type-Options"] == "nosniff", reply.headers
        assert reply.headers["Cache-Control"] == "no-store", reply.headers


async def test_a_malformed_request_is_one_info_line_without_a_traceback(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    garbage = (
        b"GET /health HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: x\r\n\r\n",
        b"GET /h\x00 HTTP/1.1\r\n\r\n",
    )
    with caplog.at_level(logging.DEBUG):
        for raw in garbage:
            reader, writer = await asyncio.open_connection("127.0.0.1", api.service.port)
            writer.write(raw)
            answer = await reader.read(4096)  # aiohttp logs before it answers
            writer.close()
            assert b" 400 " in answer.split(b"\r\n")[0], answer
    # aiohttp's own line for each (it was an ERROR with a traceback); the access log's aside.
    records = [r for r in caplog.records if r.name != "cronos.api.access" and r.name.startswith(("aiohttp", "cronos"))]
    assert len(records) == len(garbage), [(r.name, r.getMessage()) for r in records]
    for record in records:
        assert record.levelno == logging.INFO and record.exc_info is None and record.exc_text is None
        assert getattr(record, "event", None) == "http.malformed" and getattr(record, "status", None) == 400
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
