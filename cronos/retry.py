"""When a failed run's next attempt is due: exponential backoff, capped (pure, no clock).

Attempt 1 failing waits `retry_backoff_s`, attempt 2 twice that, and so on up to
`cap_s`. A run gets `max_retries` retries: attempt n may retry while n <= max_retries.
"""

from __future__ import annotations

from datetime import datetime, timedelta

DEFAULT_CAP_S = 3600.0


def should_retry(attempt: int, max_retries: int) -> bool:
    """True when the failed `attempt` (1-based) still has a retry left."""
    return attempt <= max_retries


def retry_delay_s(retry_backoff_s: float, attempt: int, cap_s: float = DEFAULT_CAP_S) -> float:
    """Seconds between the failure of `attempt` and the start of attempt + 1."""
    if retry_backoff_s <= 0:
        return 0.0
    exponent = max(attempt - 1, 0)
    if exponent > 60:  # 2**60 * anything positive is past any sane cap
        return cap_s
    return float(min(cap_s, retry_backoff_s * float(2**exponent)))


def next_due(now: datetime, retry_backoff_s: float, attempt: int, cap_s: float = DEFAULT_CAP_S) -> datetime:
    """The due time of attempt + 1 when `attempt` failed at `now`."""
    return now + timedelta(seconds=retry_delay_s(retry_backoff_s, attempt, cap_s))


def planned_delay_s(
    attempt: int, max_retries: int, retry_backoff_s: float, cap_s: float = DEFAULT_CAP_S
) -> float | None:
    """The retry delay for a failure of `attempt`, or None when no retry is left."""
    if not should_retry(attempt, max_retries):
        return None
    return retry_delay_s(retry_backoff_s, attempt, cap_s)
