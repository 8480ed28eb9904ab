"""Traces of runs (docs/tracing.md): whether they are on, and a run's trace identity. Pure.

Opt-in by the standard OpenTelemetry settings (the environment's, or .env's): on when
OTEL_TRACES_EXPORTER is `otlp` or an OTLP endpoint is set, off when OTEL_SDK_DISABLED is true or
OTEL_TRACES_EXPORTER is `none`. Off, Cronos imports nothing of OpenTelemetry and no run does any
work for traces.

A run's trace is derived from the cluster id and the run id (`run_span_ids`): the trace id and the
id of the run's span. Every process finds them from what it already has, so neither a column nor
a token field carries them (a token carries only when its tick was written, while traces are on),
and a run re-pushed, reclaimed or looked up later has the same trace.
The cluster id keeps two clusters' run 1 apart in one tracing backend.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextvars import ContextVar

OTLP = "otlp"
_ON = ("1", "true", "yes", "on")
_PROTOCOL = "http/protobuf"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")

# The W3C traceparent of the run executing in this context (None: no trace), set by the executor
# for the run's work: an http run sends it, a task finds it as `ctx.traceparent`.
TRACEPARENT: ContextVar[str | None] = ContextVar("cronos_traceparent", default=None)


def exporter(environ: Mapping[str, str]) -> str:
    """OTLP when traces are on, "" when off; ValueError naming the variable whose value Cronos
    cannot honour (another exporter, a protocol other than OTLP over HTTP with protobuf)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _ON:
        return ""
    chosen = [e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if "none" in chosen:
        return ""
    if any(e != OTLP for e in chosen):
        raise ValueError("OTEL_TRACES_EXPORTER: Cronos sends traces by OTLP only (otlp or none)")
    if not chosen and not any(environ.get(name, "").strip() for name in _ENDPOINTS):
        return ""
    for name in _PROTOCOLS:
        protocol = environ.get(name, "").strip()
        if protocol and protocol != _PROTOCOL:
            raise ValueError(f"{name}: Cronos sends OTLP over HTTP with protobuf only ({_PROTOCOL})")
    return OTLP


def run_span_ids(cluster_id: str, run_id: int) -> tuple[int, int]:
    """(trace id, span id) of run `run_id`'s span: 128 and 64 bits of a hash, never zero (W3C)."""
    digest = hashlib.blake2b(f"{cluster_id}:{run_id}".encode(), digest_size=24, person=b"cronos-run").digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:], "big") or 1


def traceparent(trace_id: int, span_id: int, *, sampled: bool) -> str:
    """The W3C Trace Context header value (version 00)."""
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}"


def entry_ms(entry_id: bytes) -> int | None:
    """When a Redis stream entry was added (its id's milliseconds, Redis's clock); None if not an id."""
    head = entry_id.split(b"-", 1)[0]
    return int(head) if head.isdigit() else None
