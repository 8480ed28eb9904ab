"""Traces across services (issue 39, docs/tracing.md), with real processes and a real OTLP receiver.

A dispatcher and an executor run with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP
receiver in this test (decoding the official protobuf messages). An http job calls a service that
records the traceparent it got and sends its own span, made with the OpenTelemetry SDK, to the same
receiver; a task job returns its `ctx.traceparent` after a span of its own. One trace per run: the
run's span (every step an event, ids as attributes) and its target's span, whose parent it is.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from cronos.traces import run_span_ids, traceparent
from tests.cluster.harness import Cluster
from tests.cluster.ledger import insert_job, with_db
from tests.integration.http_server import serve
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

SECRET = "Bearer trace-secret-7f3a9c"  # the http job's header: never in a trace
STEPS = ["written", "pushed", "claimed", "started", "finished"]


class Target:
    """The service an http job calls: records each traceparent, and makes a SERVER span of its own."""

    def __init__(self, endpoint: str) -> None:
        self.got: list[str | None] = []
        self.provider = TracerProvider(resource=Resource.create({"service.name": "target"}))
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
        self._tracer = self.provider.get_tracer("tests.target")

    async def handle(self, request: web.Request) -> web.Response:
        self.got.append(request.headers.get("traceparent"))
        with self._tracer.start_as_current_span(
            "target.handle", context=extract(request.headers), kind=SpanKind.SERVER
        ):
            return web.json_response({"ok": True})


@asynccontextmanager
async def target_service(endpoint: str) -> AsyncIterator[tuple[Target, str]]:
    target = Target(endpoint)
    runner, port = await serve(target.handle, "127.0.0.1")
    try:
        yield target, f"http://127.0.0.1:{port}/hook"
    finally:
        await asyncio.to_thread(target.provider.shutdown)  # its spans go out (a blocking POST: off the loop)
        await runner.cleanup()


async def _completed(dsn: str, job_id: int) -> list[dict[str, Any]]:
    async def work(conn: asyncpg.Connection) -> list[dict[str, Any]]:
        rows = await conn.fetch(
            "SELECT id, attempt, trigger, result FROM runs WHERE job_id = $1 AND state = 'completed' ORDER BY id",
            job_id,
        )
        return [dict(r) for r in rows]

    return await with_db(dsn, work)


def _run_span(receiver: OtlpReceiver, run_id: int) -> ReceivedSpan | None:
    found = [s for s in receiver.named("cronos.run") if s.attributes.get("cronos.run.id") == run_id]
    return found[0] if found else None


async def test_one_trace_across_an_http_job_and_its_target(make_cluster: Callable[..., Cluster]) -> None:
    async with otlp_receiver() as receiver, target_service(receiver.url) as (target, url):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        cluster = await asyncio.to_thread(
            make_cluster, dispatchers=1, executors=1, extra_env=env, executor_imports=("tests.cluster.trace_tasks",)
        )
        headers = {"Authorization": SECRET}
        http_job = await insert_job(cluster.dsn, "traced-http", "* * * * * *", kind="http",
                                    payload={"url": url, "method": "POST", "headers": headers})  # fmt: skip
        task_job = await insert_job(cluster.dsn, "traced-task", "* * * * * *", payload={"action": "trace.echo"})
        http_run = (await wait_for(lambda: _completed(cluster.dsn, http_job.id), timeout=30, what="an http run"))[0]
        task_run = (await wait_for(lambda: _completed(cluster.dsn, task_job.id), timeout=30, what="a task run"))[0]
        cluster_id = await with_db(cluster.dsn, lambda conn: conn.fetchval("SELECT id::text FROM cluster_identity"))

        trace_id, span_id = run_span_ids(cluster_id, http_run["id"])
        sent = traceparent(trace_id, span_id, sampled=True)
        assert sent in target.got  # the run's traceparent reached the service it called
        span = await wait_for(lambda: _async(_run_span(receiver, http_run["id"])), timeout=15, what="the run's span")
        assert (span.service, span.trace_id, span.span_id, span.parent_span_id) == (
            "cronos-executor", f"{trace_id:032x}", f"{span_id:016x}", "",
        )  # fmt: skip
        assert [name for name, _at in span.events] == STEPS  # the dispatcher's steps and the executor's, in order
        times = [at for _name, at in span.events]
        assert times == sorted(times) and span.start_ns == times[0] and span.end_ns >= times[-1]
        assert span.attributes | {"cronos.run.scheduled_for": "", "cronos.node.id": ""} == {
            "cronos.job.id": http_job.id, "cronos.job.name": "traced-http", "cronos.job.kind": "http",
            "cronos.run.id": http_run["id"], "cronos.run.attempt": 1, "cronos.run.trigger": "schedule",
            "cronos.run.state": "completed", "cronos.run.scheduled_for": "", "cronos.node.id": "",
        }  # fmt: skip

        await asyncio.to_thread(target.provider.force_flush)

        def served() -> list[ReceivedSpan]:
            return [s for s in receiver.named("target.handle") if s.trace_id == span.trace_id]

        theirs = (await wait_for(lambda: _async(served()), timeout=15, what="the target's span"))[0]
        assert (theirs.service, theirs.parent_span_id, theirs.kind) == ("target", span.span_id, 2)  # SERVER

        # A task: ctx.traceparent is its run's, and a span it makes with the OpenTelemetry API is a child.
        task_trace, task_span = run_span_ids(cluster_id, task_run["id"])
        assert json.loads(task_run["result"]) == {"traceparent": traceparent(task_trace, task_span, sampled=True)}
        work = await wait_for(
            lambda: _async([s for s in receiver.named("task.work") if s.trace_id == f"{task_trace:032x}"]),
            timeout=15,
            what="the task's own span",
        )
        assert work[0].parent_span_id == f"{task_span:016x}"
        # Secrets never reach a trace: not the header's value, in any request the receiver got.
        assert receiver.bodies and not any(b"trace-secret" in body for body in receiver.bodies)


async def _async(value: Any) -> Any:
    return value
