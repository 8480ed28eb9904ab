"""cronos.traces: when traces are on, a run's trace identity, the traceparent; and that, off,
nothing of OpenTelemetry is imported by any role."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cronos.errors import ConfigError
from cronos.settings import load_settings
from cronos.traces import entry_ms, exporter, run_span_ids, traceparent

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ""),  # opt-in: nothing set, nothing sent
        ({"OTEL_SERVICE_NAME": "cron"}, ""),
        (ENDPOINT, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "otlp"),  # the SDK's default endpoint, localhost:4318
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, ""),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, ""),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "false"}, "otlp"),
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "otlp"),
    ],
)
def test_traces_are_opt_in_by_the_standard_settings(environ: dict[str, str], expected: str) -> None:
    assert exporter(environ) == expected


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "OTEL_TRACES_EXPORTER"),
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
    ],
)
def test_what_cronos_cannot_send_fails_at_start_naming_the_variable(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=f"^{named}: "):
        load_settings(environ, env_file=None)


def test_settings_carry_the_decision() -> None:
    assert load_settings(ENDPOINT, env_file=None).traces == "otlp"
    assert load_settings({}, env_file=None).traces == ""


def test_a_run_trace_is_derived_from_its_cluster_and_id() -> None:
    trace_id, span_id = run_span_ids("c1", 42)
    assert run_span_ids("c1", 42) == (trace_id, span_id)  # any process finds the same
    assert 0 < trace_id < 2**128 and 0 < span_id < 2**64
    assert run_span_ids("c1", 43)[0] != trace_id and run_span_ids("c2", 42)[0] != trace_id


def test_traceparent_is_w3c_version_00() -> None:
    assert traceparent(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, sampled=True) == (
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    )
    assert traceparent(1, 2, sampled=False) == "00-00000000000000000000000000000001-0000000000000002-00"


def test_entry_ms_is_the_stream_entry_time() -> None:
    assert entry_ms(b"1700000000123-4") == 1700000000123
    assert entry_ms(b"junk") is None


def test_off_nothing_of_opentelemetry_is_imported() -> None:
    """Every role's modules imported, settings loaded with traces off: Cronos imports no OpenTelemetry
    module (a fresh process: the test session imports the SDK). redis-py 8 imports the SDK's metrics
    package itself when it is installed, whatever Cronos does: those are left out, as long as the
    trace SDK and the exporter, Cronos's only uses, stay unloaded."""
    code = """
import sys
from pathlib import Path
import redis, redis.asyncio
before = {m for m in sys.modules if m.split(".")[0] == "opentelemetry"}
import cronos.cli, api.app, dispatcher.service, dispatcher.term, executor.service, executor.pipeline
import executor.kinds.http, executor.kinds.task, executor.tracing
from cronos.settings import load_settings
assert load_settings({}, env_file=None).traces == ""
loaded = {m for m in sys.modules if m.split(".")[0] == "opentelemetry"}
ours = [m for m in loaded if m.startswith(("opentelemetry.sdk.trace", "opentelemetry.exporter"))]
print(sorted(loaded - before), ours)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[] []", "")


def test_dotenv_turns_traces_on_and_the_environment_wins(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318\nOTEL_SERVICE_NAME=from-file\n")
    loaded = load_settings({"OTEL_SERVICE_NAME": "from-env"}, env_file=dotenv)
    assert loaded.traces == "otlp"
    expected = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SERVICE_NAME": "from-env"}
    assert dict(loaded.otel) == expected
    assert load_settings({"OTEL_SDK_DISABLED": "true"}, env_file=dotenv).traces == ""
