"""Runs' spans with the OpenTelemetry SDK: imported only when traces are on (executor.tracing).

One span per run, "cronos.run", from its tick to its end: it starts when the leader wrote the
tick (the token's written_ms, stamped while the dispatcher traces) or else when it was pushed (its
stream entry's id), and carries the steps as events: written, pushed, claimed, started, finished.
Its trace id and span id are the run's (cronos.traces.run_span_ids), pinned through the id
generator, so the span a process finds from a run id alone is this one. While the work runs the
span is current: the traceparent an http run sends and a task's `ctx.traceparent` name it, and
spans the task makes with the OpenTelemetry API are its children.

Attributes are ids, names, kinds and states only: no payload, header, result or error text (those
may hold a job's secrets). Spans are exported in batches from the SDK's own thread (OTLP over
HTTP, configured by the standard OTEL_* variables, from the environment or .env), never on the
event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from contextvars import ContextVar, Token
from datetime import datetime

from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Span, Status, StatusCode

from cronos import traces
from cronos.messages import RunToken
from cronos.settings import Settings
from cronos.store.runs import ClaimedRun, Outcome

SERVICE = "cronos-executor"  # service.name unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names one

# (trace id, span id) the next span started in this context gets: a run's own (see RunTracer.begin).
_PINNED: ContextVar[tuple[int, int] | None] = ContextVar("cronos_pinned_ids", default=None)


class PinnedIds(IdGenerator):
    """Random ids, but a run's span gets the run's (pinned while it starts)."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        pinned = _PINNED.get()
        return pinned[0] if pinned is not None else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        pinned = _PINNED.get()
        return pinned[1] if pinned is not None else self._random.generate_span_id()


def _ns(instant: datetime) -> int:
    return int(instant.timestamp() * 1e9)


class RunSpan:
    """A claimed run's span, current in the task that executes it until `end`."""

    __slots__ = ("_context", "_span", "_traceparent")

    def __init__(self, span: Span) -> None:
        self._span = span
        ids = span.get_span_context()
        value = traces.traceparent(ids.trace_id, ids.span_id, sampled=ids.trace_flags.sampled)
        self._traceparent: Token[str | None] = traces.TRACEPARENT.set(value)
        self._context = context.attach(trace.set_span_in_context(span))

    def end(self, outcome: Outcome | None) -> None:
        context.detach(self._context)
        traces.TRACEPARENT.reset(self._traceparent)
        if outcome is None:  # not the run's end (it is another's now): nothing is sent
            return
        span = self._span
        span.set_attribute("cronos.run.state", outcome.state)
        span.add_event("finished", {"cronos.run.state": outcome.state})
        if outcome.state == "failed":
            span.set_status(Status(StatusCode.ERROR))  # no description: the error text may hold secrets
        span.end()


class RunTracer:
    def __init__(self, settings: Settings, cluster_id: str) -> None:
        # The SDK reads its settings from the environment: those from .env too (the environment's win).
        os.environ.update({name: value for name, value in settings.otel if name not in os.environ})
        resource = Resource.create({SERVICE_INSTANCE_ID: settings.node_id})
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
        self._provider = TracerProvider(resource=resource, id_generator=PinnedIds())
        # The exporter reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout, compression) itself.
        self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(self._provider)  # tasks' own spans go out with the runs'
        self._tracer = self._provider.get_tracer("cronos.executor")
        self._cluster_id = cluster_id
        self._node_id = settings.node_id

    def begin(self, token: RunToken, entry_id: bytes, run: ClaimedRun) -> RunSpan:
        now_ns = time.time_ns()
        pushed_ms = traces.entry_ms(entry_id)
        written_ms = token.written_ms if isinstance(token.written_ms, int) else None
        claimed_ns = _ns(run.started_at)
        steps = [
            ("written", None if written_ms is None else written_ms * 1_000_000),
            ("pushed", None if pushed_ms is None else pushed_ms * 1_000_000),
            ("claimed", claimed_ns),
        ]
        known = [(name, at) for name, at in steps if at is not None]
        pin = _PINNED.set(traces.run_span_ids(self._cluster_id, run.id))
        try:
            span = self._tracer.start_span(
                "cronos.run",
                context=context.Context(),  # a root: the run's trace is its own
                kind=trace.SpanKind.CONSUMER,
                start_time=min(at for _name, at in known),
                attributes={
                    "cronos.job.id": run.job_id,
                    "cronos.job.name": run.name,
                    "cronos.job.kind": run.kind,
                    "cronos.run.id": run.id,
                    "cronos.run.attempt": run.attempt,
                    "cronos.run.trigger": run.trigger,
                    "cronos.run.scheduled_for": run.scheduled_for.isoformat(),
                    "cronos.node.id": self._node_id,
                },
            )
        finally:
            _PINNED.reset(pin)
        for name, at in known:
            span.add_event(name, timestamp=at)
        span.add_event("started", timestamp=now_ns)
        return RunSpan(span)

    async def close(self) -> None:
        await asyncio.to_thread(self._provider.shutdown)  # its last batch goes out (a blocking POST)
