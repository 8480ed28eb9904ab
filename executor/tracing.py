"""A run's span, as the pipeline sees it (docs/tracing.md). The SDK is `executor.otel`, imported by
`open_tracer` only when traces are on: off, no OpenTelemetry module is ever imported and the
pipeline's only cost is `deps.tracer is None`.
"""

from __future__ import annotations

from typing import Protocol

from cronos.errors import ConfigError
from cronos.messages import RunToken
from cronos.settings import Settings
from cronos.store.runs import ClaimedRun, Outcome


class RunSpan(Protocol):
    def end(self, outcome: Outcome | None) -> None:
        """The run's outcome was written (None: it was not, the run is another's: nothing is sent)."""


class Tracer(Protocol):
    def begin(self, token: RunToken, entry_id: bytes, run: ClaimedRun) -> RunSpan:
        """A claimed run's span, current (its traceparent too) in this task until `end`."""

    async def close(self) -> None:
        """Send what is left, then stop."""


def open_tracer(settings: Settings, cluster_id: str) -> Tracer:
    """The executor's tracer, for traces on (Settings.traces); ConfigError when the SDK is missing."""
    try:
        from executor import otel
    except ImportError as exc:
        raise ConfigError(
            f"traces are on (OTEL_* settings) but the OpenTelemetry SDK is missing ({exc}):"
            " pip install 'cronos[otel]', or set OTEL_SDK_DISABLED=true"
        ) from None
    return otel.RunTracer(settings, cluster_id)
