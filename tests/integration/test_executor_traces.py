"""Runs' spans and the traceparent of http runs (docs/tracing.md), by a real executor, exported
to a real OTLP/HTTP receiver (tests/otlp_receiver.py: the official protobuf messages decoded)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
import pytest
from aiohttp import web

from cronos.settings import Settings
from cronos.store.identity import database_id
from cronos.traces import run_span_ids, traceparent
from executor.service import Executor
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness, insert_run, tick
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.waiting import wait_for

SECRET = "Bearer span-secret-51c0"
THEIRS = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # a job's own traceparent header


@pytest.fixture
async def receiver(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OtlpReceiver]:
    async with otlp_receiver() as found:
        # The SDK reads its own settings from the environment (the endpoint, the batch delay).
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        yield found


@pytest.fixture
async def requests() -> AsyncIterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    seen: list[tuple[str, dict[str, str]]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append((request.path, dict(request.headers)))
        if request.path == "/moved":
            raise web.HTTPFound("/hook")
        return web.Response(text="ok")

    runner, port = await serve(handle, "127.0.0.1")
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def test_http_run_sends_its_traceparent_and_its_span(
    harness: Harness,
    settings: Settings,
    receiver: OtlpReceiver,
    requests: tuple[str, list[tuple[str, dict[str, str]]]],
) -> None:
    url, seen = requests
    headers = {"Authorization": SECRET, "traceparent": THEIRS}
    payload = {"url": f"{url}/moved", "headers": headers, "follow_redirects": True}
    job = await harness.job(kind="http", payload=payload)
    token = await insert_run(harness.pool, job, tick(0))
    written_ms = 1_000  # as a tracing leader stamps it: the span starts at the tick's write
    await harness.stream.publish([msgspec.structs.replace(token, written_ms=written_ms)])
    async with Executor(msgspec.structs.replace(settings, traces="otlp")) as ex:
        assert await ex.run_once() == {"completed": 1}
    trace_id, span_id = run_span_ids(await database_id(harness.pool), token.run_id)
    ours = traceparent(trace_id, span_id, sampled=True)
    # Both hops carry the run's (not the job's own header), though the secret stayed at the first path.
    assert [(path, h.get("traceparent"), "Authorization" in h) for path, h in seen] == [
        ("/moved", ours, True),
        ("/hook", ours, False),
    ]
    (span,) = await wait_for(lambda: _spans(receiver), what="the run's span")
    assert (span.trace_id, span.span_id, span.parent_span_id) == (f"{trace_id:032x}", f"{span_id:016x}", "")
    assert [name for name, _at in span.events] == ["written", "pushed", "claimed", "started", "finished"]
    assert span.start_ns == written_ms * 1_000_000 == span.events[0][1]
    assert span.attributes["cronos.run.id"] == token.run_id and span.attributes["cronos.run.state"] == "completed"
    assert not any(SECRET.encode() in body for body in receiver.bodies)


async def test_failed_run_span_is_an_error_without_its_message(
    harness: Harness, settings: Settings, receiver: OtlpReceiver
) -> None:
    job = await harness.job(kind="task", payload={"action": "no-such-task-" + SECRET})
    await harness.queue(job)
    async with Executor(msgspec.structs.replace(settings, traces="otlp")) as ex:
        assert await ex.run_once() == {"failed": 1}
    (span,) = await wait_for(lambda: _spans(receiver), what="the run's span")
    assert [name for name, _at in span.events] == ["pushed", "claimed", "started", "finished"]  # no stamp: no write
    assert span.status_code == 2 and span.attributes["cronos.run.state"] == "failed"  # STATUS_CODE_ERROR
    assert not any(b"span-secret" in body for body in receiver.bodies)  # neither payload nor error text


async def test_traces_off_send_no_traceparent(
    harness: Harness, settings: Settings, requests: tuple[str, list[tuple[str, dict[str, str]]]]
) -> None:
    url, seen = requests
    job = await harness.job(kind="http", payload={"url": f"{url}/hook", "headers": {"traceparent": THEIRS}})
    await harness.queue(job)
    assert settings.traces == ""
    async with Executor(settings) as ex:
        assert ex.deps is not None and ex.deps.tracer is None
        assert await ex.run_once() == {"completed": 1}
    assert [h.get("traceparent") for _path, h in seen] == [THEIRS]  # the job's own header, untouched


async def _spans(receiver: OtlpReceiver) -> list[ReceivedSpan] | None:
    return receiver.named("cronos.run") or None
