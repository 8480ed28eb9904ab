"""Known secret values never reach a run's record or the executor's log lines (issue 22, item 10):
a real executor runs task, http and shell jobs whose work writes its own secrets into its error,
traceback, result and logs; the ledger and every line logged hold *** instead."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pytest
from aiohttp import web

import cronos
from cronos.logs import JsonFormatter, TextFormatter
from cronos.models import Run
from cronos.settings import Settings
from executor.service import Executor
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness

PASSWORD = 'pa55-"word"-1'  # JSON and repr escape its quotes: written in every form, scrubbed in every form
TOKEN = "tok3n-value-2"


class Lines:
    """Every log line as the executor writes it (both formats), and pytest's captured records."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog
        self.streams = (io.StringIO(), io.StringIO())

    def text(self) -> str:
        return "".join(stream.getvalue() for stream in self.streams) + self.caplog.text

    def holds(self, fragment: str) -> bool:
        return fragment in self.text()


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Iterator[Lines]:
    caplog.set_level(logging.DEBUG)
    found = Lines(caplog)
    handlers = []
    for stream, formatter in zip(found.streams, (JsonFormatter(), TextFormatter()), strict=True):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(formatter)
        handlers.append(handler)
        logging.getLogger().addHandler(handler)
    try:
        yield found
    finally:
        for handler in handlers:
            logging.getLogger().removeHandler(handler)


def _leaks(run: Run, lines: Lines, *secrets: str) -> list[str]:
    """Where any form of a secret shows: as is, JSON-escaped (once or twice) or repr-escaped."""

    def json(text: str) -> str:
        return msgspec.json.encode(text).decode()[1:-1]

    forms = {form for secret in secrets for form in (secret, json(secret), json(json(secret)), repr(secret)[1:-1])}
    places = {"error": run.error or "", "traceback": run.traceback or "", "result": run.result or "",
              "logs": lines.text()}  # fmt: skip
    return [f"{form!r} in {where}" for where, text in places.items() for form in forms if form in text]


async def _run(harness: Harness, settings: Settings, **job: Any) -> Run:
    job_id = await harness.job(**job)
    await harness.queue(job_id)
    async with Executor(settings) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job_id)
    return run


@pytest.fixture
def leaky_tasks() -> Iterator[None]:
    @cronos.task("test.leak_raise", replace=True)
    async def leak_raise(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
        ctx.logger.warning("logging in with %s", payload["password"], extra={"creds": payload["opts"]})
        raise RuntimeError(f"login refused for password {payload['password']!r}, payload {payload}")

    @cronos.task("test.leak_return", replace=True)
    def leak_return(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
        ctx.logger.info("got %r", payload)  # a plain function: in a worker thread
        return payload

    yield
    cronos.tasks.unregister("test.leak_raise")
    cronos.tasks.unregister("test.leak_return")


PAYLOAD = {"password": PASSWORD, "opts": {"api_token": TOKEN}, "user": "alice"}


async def test_a_task_raising_with_its_secret(
    harness: Harness, settings: Settings, lines: Lines, leaky_tasks: None
) -> None:
    run = await _run(harness, settings, payload={"action": "test.leak_raise", **PAYLOAD})
    assert run.state == "failed" and run.error is not None and run.traceback is not None
    assert _leaks(run, lines, PASSWORD, TOKEN) == []
    assert run.error.startswith("RuntimeError: login refused for password '***', payload {")
    assert "RuntimeError: login refused" in run.traceback and "alice" in run.error
    assert lines.holds("logging in with ***") and lines.holds("run failed: RuntimeError: login refused")


async def test_a_task_returning_its_payload(
    harness: Harness, settings: Settings, lines: Lines, leaky_tasks: None
) -> None:
    run = await _run(harness, settings, payload={"action": "test.leak_return", **PAYLOAD})
    assert run.state == "completed" and run.result is not None
    assert _leaks(run, lines, PASSWORD, TOKEN) == []
    assert msgspec.json.decode(run.result) == {"action": "test.leak_return", "password": "***",
                                               "opts": {"api_token": "***"}, "user": "alice"}  # fmt: skip
    assert lines.holds("'password': '***'")


@pytest.fixture
async def echo() -> AsyncIterator[str]:
    """A receiver that answers 500 with the request it got: headers, query and body."""

    async def handle(request: web.Request) -> web.StreamResponse:
        seen = {"headers": dict(request.headers), "query": request.query_string, "body": await request.text()}
        return web.Response(status=500, text=msgspec.json.encode(seen).decode())

    runner, port = await serve(handle, "127.0.0.1")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_an_http_reply_echoing_the_secrets(harness: Harness, settings: Settings, lines: Lines, echo: str) -> None:
    payload = {
        "url": f"{echo}/hook?api_key=qu3ry-secret&page=2",
        "headers": {"X-Hook": f"Bearer {TOKEN}", "X-Plain": "plain-value"},
        "body": {"password": PASSWORD},
    }
    run = await _run(harness, settings, kind="http", payload=payload)
    assert run.state == "failed" and run.result is not None and run.result.startswith("HTTP 500\n")
    assert _leaks(run, lines, PASSWORD, TOKEN, "qu3ry-secret") == []
    assert "plain-value" in run.result and '"X-Hook":"***"' in run.result and "api_key=***&page=2" in run.result


async def test_a_shell_job_printing_its_env(harness: Harness, settings: Settings, lines: Lines) -> None:
    payload = {"argv": ["sh", "-c", 'echo "token=$API_TOKEN"; echo "$API_TOKEN" >&2; exit 3'],
               "env": {"API_TOKEN": TOKEN, "REGION": "eu-west-1"}}  # fmt: skip
    run = await _run(harness, msgspec.structs.replace(settings, allow_shell=True), kind="shell", payload=payload)
    assert run.state == "failed" and run.result is not None
    assert _leaks(run, lines, TOKEN) == []
    assert "token=***" in run.result
