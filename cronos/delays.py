"""Start delay, one definition for the API, the CLI, the console, the metrics and the benchmarks.

The start delay is the user's view (DESIGN.md): when the run started minus its scheduled tick
(`scheduled_for`), whatever made it late. Beside it, the two parts it adds up to:

- held back = due_at - scheduled_for: how long Cronos chose to hold the run before it was due
  (a retry's backoff, catch-up pacing, the job's jitter);
- waited = started_at - due_at: how long after it was due it started (behind a predecessor under
  `forbid` or a buffer, or for a free executor; a few milliseconds otherwise).

Pure: no clock, no I/O.
"""

from __future__ import annotations

from datetime import datetime


def start_delay_s(scheduled_for: datetime, started_at: datetime | None) -> float | None:
    """started_at - scheduled_for in seconds; None until the run starts."""
    return None if started_at is None else (started_at - scheduled_for).total_seconds()


def held_back_s(scheduled_for: datetime, due_at: datetime) -> float:
    """due_at - scheduled_for in seconds: known from the run's creation."""
    return (due_at - scheduled_for).total_seconds()


def waited_s(due_at: datetime, started_at: datetime | None) -> float | None:
    """started_at - due_at in seconds; None until the run starts."""
    return None if started_at is None else (started_at - due_at).total_seconds()


def ms(seconds: float | None) -> float | None:
    """Seconds as milliseconds to the microsecond, as the API's *_ms fields carry them."""
    return None if seconds is None else round(seconds * 1000, 3)
