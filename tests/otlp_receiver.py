"""A real OTLP/HTTP trace receiver: POST /v1/traces bodies decoded as the official protobuf
ExportTraceServiceRequest (opentelemetry-proto), gzip or not, every span kept with its service."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.integration.http_server import serve

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16
    parent_span_id: str  # "" for a root
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, int]]  # (name, time in unix ns)
    start_ns: int
    end_ns: int
    status_code: int


def _value(value: AnyValue) -> Any:
    field = value.WhichOneof("value")
    return None if field is None else getattr(value, field)


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.bodies: list[bytes] = []  # every request as decoded bytes (a test may search them)
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        """POST /v1/traces, as the OTLP/HTTP specification has it."""
        if (request.method, request.path) != ("POST", "/v1/traces"):
            return web.Response(status=404)
        if request.content_type != PROTOBUF:
            return web.Response(status=415, text=f"want {PROTOBUF}")
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.bodies.append(body)
        message = ExportTraceServiceRequest.FromString(body)
        for resource_spans in message.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name", "")),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            events=[(e.name, e.time_unix_nano) for e in span.events],
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            status_code=span.status.code,
                        )
                    )
        reply = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type=PROTOBUF)

    def named(self, name: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name]


@asynccontextmanager
async def otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """A receiver listening on a free loopback port; `url` is its OTEL_EXPORTER_OTLP_ENDPOINT."""
    receiver = OtlpReceiver()
    runner, port = await serve(receiver.handle, "127.0.0.1")
    receiver.url = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()
