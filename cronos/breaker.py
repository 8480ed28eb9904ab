"""The circuit breaker (issue 40): a job whose runs fail K times in a row pauses itself.

Pure: no clock, no I/O. The leader (dispatcher/breaker.py) gives it the facts the health evaluator
already keeps per job (cronos.health: the failures in a row, with no retry left, and the newest
success) and the breaker's own last trip; it adds nothing to the run path.

The failures that count are those since the later of the job's newest success and the last trip:
a job resumed by hand after a trip pauses again only after K more failures, not at the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# The pause note (stable text: the console and `cronos jobs get` show it).
NOTE = "paused by the circuit breaker after {count} failed runs in a row (threshold {threshold})"


@dataclass(frozen=True, slots=True)
class Trip:
    """The breaker's last trip of a job: when, and the streak it had then."""

    at: datetime
    streak: int


@dataclass(frozen=True, slots=True)
class Facts:
    status: str  # the job's
    streak: int  # its runs failed in a row, with no retry left (job_health.consecutive_failures)
    last_success_at: datetime | None
    last_trip: Trip | None = None


def counted(facts: Facts) -> int:
    """The failures in a row since the later of the newest success and the last trip."""
    trip = facts.last_trip
    if trip is None or (facts.last_success_at is not None and facts.last_success_at > trip.at):
        return facts.streak
    return max(facts.streak - trip.streak, 0)


def trips(facts: Facts, threshold: int) -> bool:
    """Whether the breaker pauses the job now: it is active and failed `threshold` times in a row
    (counted as above). A threshold of 0 is no breaker."""
    return threshold > 0 and facts.status == "active" and counted(facts) >= threshold


def note(facts: Facts, threshold: int) -> str:
    return NOTE.format(count=counted(facts), threshold=threshold)
