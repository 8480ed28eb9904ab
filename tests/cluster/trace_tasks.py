"""Tasks for tests/cluster/test_traces.py (`cronos executor --import tests.cluster.trace_tasks`)."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

import cronos


@cronos.task("trace.echo", replace=True)
async def echo(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
    """Returns the traceparent the run got, after a span of its own made with the OpenTelemetry API
    (the executor's provider sends it; the run's span is its parent)."""
    with trace.get_tracer("tests.trace_tasks").start_as_current_span("task.work"):
        pass
    return {"traceparent": ctx.traceparent}
